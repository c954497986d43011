// approxmul_bmm under fuzz: batch/row/col/inner sizes (0, negative, with a
// product beyond int64), batch, row and column strides (broadcast zero batch
// strides, negative, huge), dtypes, zero points, NULL pointers, thread counts
// and tables with extreme entries. Successful results are compared
// bit-exactly with a 128-bit reference computed here; failures must leave
// the output untouched.
#include "fuzz_common.hpp"

using namespace fuzz;

namespace {

struct Sizes {
    int64_t batch, rows, cols, inner;
    bool valid;
};

Sizes pick_sizes(FuzzedDataProvider &in) {
    if (in.ConsumeIntegralInRange(0, 15) == 0) {
        Sizes s{in.ConsumeIntegral<int64_t>(), in.ConsumeIntegral<int64_t>(),
                in.ConsumeIntegral<int64_t>(), in.ConsumeIntegral<int64_t>(), false};
        int64_t work;
        const bool overflows = __builtin_mul_overflow(s.batch, s.rows, &work) ||
                               __builtin_mul_overflow(work, s.cols, &work) ||
                               __builtin_mul_overflow(work, s.inner > 1 ? s.inner : 1, &work);
        // only sizes the library must refuse: running them would take forever
        if (s.batch >= 0 && s.rows >= 0 && s.cols >= 0 && s.inner >= 0 && !overflows)
            s.batch = -1;
        return s;
    }
    Sizes s{in.ConsumeIntegralInRange<int64_t>(0, 5), in.ConsumeIntegralInRange<int64_t>(0, 24),
            in.ConsumeIntegralInRange<int64_t>(0, 24), in.ConsumeIntegralInRange<int64_t>(0, 300),
            true};
    while (s.batch * s.rows * s.cols * s.inner > 40000) s.inner /= 2;
    return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    pick_threads(in);
    auto m = make_model(in);
    const Sizes s = pick_sizes(in);

    Tensor a, b, c;
    for (Tensor *t : {&a, &b, &c}) t->ndim = 3;
    a.dtype = pick_operand_dtype(in, *m);
    b.dtype = pick_operand_dtype(in, *m);
    const int64_t a_shape[3] = {s.batch, s.rows, s.inner}, b_shape[3] = {s.batch, s.inner, s.cols},
                  c_shape[3] = {s.batch, s.rows, s.cols};
    std::copy(a_shape, a_shape + 3, a.shape);
    std::copy(b_shape, b_shape + 3, b.shape);
    std::copy(c_shape, c_shape + 3, c.shape);
    const bool null_multiplier = in.ConsumeIntegralInRange(0, 31) == 0;
    const auto [a_zero, b_zero, acc, acc_status, c_dtype] =
        pick_gemm_output(in, *m, s.valid ? s.inner : 0);
    c.dtype = c_dtype;

    bool all_valid = s.valid && !null_multiplier && acc_status == APPROXMUL_OK;
    bool operands_valid = true;
    if (s.valid) {
        for (Tensor *t : {&a, &b}) {
            pick_strides(*t, in);
            if (in.ConsumeIntegralInRange(0, 3) == 0) t->strides[0] = 0;  // one matrix for all
            allocate(*t);
            operands_valid &= operand_dtype_ok(t->dtype, *m);
            operands_valid &= fill_tensor(*t, *m, fuzzed_operand(in, *m));
            all_valid &= t->addressable;
        }
        all_valid &= operands_valid;
        pick_strides(c, in);
        allocate(c);
        all_valid &= c.addressable && ordinary_output(c) &&
                     (c.dtype == APPROXMUL_INT64 || (c.dtype == APPROXMUL_INT32 && acc == APPROXMUL_INT32));
    } else {
        // sizes the library must refuse before it looks at any pointer
        static unsigned char dummy[16];
        for (Tensor *t : {&a, &b, &c}) {
            for (int64_t &stride : t->strides) stride = pick_stride(in, 1);
            t->data = dummy;
        }
    }
    // NULL data pointers: an error unless the tensor is empty
    for (Tensor *t : {&a, &b, &c})
        if (in.ConsumeIntegralInRange(0, 31) == 0) {
            t->data = nullptr;
            all_valid &= s.batch == 0 || t->shape[1] == 0 || t->shape[2] == 0;
        }
    // A huge view that could exist is the caller's promise the library must
    // trust (it would read it): no real memory here, so no call.
    if (s.valid)
        for (const Tensor *t : {&a, &b, &c})
            if (!t->addressable && !t->impossible && t->data != nullptr && t->size() != 0) return 0;
    std::fill(c.storage.begin(), c.storage.end(), 0x5a);
    const std::vector<unsigned char> before = c.storage;

    const approxmul_status status = checked(approxmul_bmm(
        null_multiplier ? nullptr : m->handle, s.batch, s.rows, s.cols, s.inner,
        static_cast<approxmul_dtype>(a.dtype), a.data, a.strides[0], a.strides[1], a.strides[2],
        static_cast<approxmul_dtype>(b.dtype), b.data, b.strides[0], b.strides[1], b.strides[2],
        a_zero, b_zero,
        static_cast<approxmul_dtype>(c.dtype), c.data, c.strides[0], c.strides[1], c.strides[2]));

    if (all_valid) expect(status == APPROXMUL_OK, "valid bmm refused", status);
    if (s.valid)
        for (const Tensor *t : {&a, &b, &c})
            if (t->impossible) expect(status != APPROXMUL_OK, "impossible view accepted");
    if (status != APPROXMUL_OK) {
        expect(c.storage == before, "output written by a failing call", status);
        return 0;
    }
    expect(s.valid && !null_multiplier, "invalid sizes or multiplier accepted");
    expect(operands_valid && m->in_range(a_zero) && m->in_range(b_zero),
           "operand dtype or value outside the multiplier accepted");
    expect(c.dtype == APPROXMUL_INT64 || (c.dtype == APPROXMUL_INT32 && acc == APPROXMUL_INT32),
           "output type accepted that can overflow", c.dtype);
    expect_only_view_written(c);
    for (int64_t t = 0; t < s.batch; ++t)
        for (int64_t i = 0; i < s.rows; ++i)
            for (int64_t j = 0; j < s.cols; ++j) {
                i128 sum = 0;
                for (int64_t k = 0; k < s.inner; ++k) {
                    const int64_t ai[3] = {t, i, k}, bi[3] = {t, k, j};
                    const int64_t x = a.get(ai), y = b.get(bi);
                    sum += static_cast<i128>(m->product(x, y)) - static_cast<i128>(b_zero) * x -
                           static_cast<i128>(a_zero) * y + static_cast<i128>(a_zero) * b_zero;
                }
                const int64_t ci[3] = {t, i, j};
                expect(static_cast<i128>(c.get(ci)) == sum, "bmm result differs from reference",
                       static_cast<long long>((t * s.rows + i) * s.cols + j));
            }
    return 0;
}
