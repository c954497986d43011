// approxmul_multiply under fuzz: elementwise products over strided views
// (negative, zero, huge strides), valid and invalid dtypes, NULL pointers.
// Results must equal the harness's own model; failures write nothing.
#include "fuzz_common.hpp"

using namespace fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    pick_threads(in);
    auto m = make_model(in);
    View a, b, c;
    const bool huge = in.ConsumeIntegralInRange(0, 15) == 0;
    const int64_t rows = huge ? in.ConsumeIntegral<int64_t>() : in.ConsumeIntegralInRange(0, 64);
    const int64_t cols = huge ? in.ConsumeIntegral<int64_t>() : in.ConsumeIntegralInRange(0, 64);
    for (View *v : {&a, &b, &c}) v->rows = rows, v->cols = cols;
    a.dtype = pick_operand_dtype(in, *m);
    b.dtype = pick_operand_dtype(in, *m);
    c.dtype = in.ConsumeIntegralInRange(0, 7) == 0 ? in.ConsumeIntegralInRange(-1, 8)
              : in.ConsumeBool()                   ? APPROXMUL_INT32
                                                   : APPROXMUL_INT64;
    if (huge) {
        // sizes the library must refuse before touching any pointer
        if (rows >= 0 && cols >= 0 && static_cast<i128>(rows) * cols <= INT64_MAX) return 0;
        int64_t dummy[4] = {0, 0, 0, 0};
        const approxmul_status status = checked(approxmul_multiply(
            m->handle, rows, cols, static_cast<approxmul_dtype>(a.dtype), dummy, 1, 1,
            static_cast<approxmul_dtype>(b.dtype), dummy, 1, 1,
            static_cast<approxmul_dtype>(c.dtype), dummy + 2, 1, 1));
        expect(status != APPROXMUL_OK, "negative or overflowing size accepted");
        return 0;
    }
    bool valid = true;
    for (View *v : {&a, &b}) {
        layout(*v, in, in.ConsumeBool());
        valid &= operand_dtype_ok(v->dtype, *m);
        if (v->addressable && dtype_size(v->dtype) != 0) valid &= fill_operands(*v, in, *m);
    }
    layout(c, in, in.ConsumeBool());
    for (const View *v : {&a, &b, &c})
        if (!v->addressable && !v->impossible && dtype_size(v->dtype) != 0) return 0;
    std::fill(c.storage.begin(), c.storage.end(), 0x5a);
    const std::vector<unsigned char> before = c.storage;
    const approxmul_status status = checked(approxmul_multiply(
        m->handle, rows, cols, static_cast<approxmul_dtype>(a.dtype), a.data, a.row_stride,
        a.col_stride, static_cast<approxmul_dtype>(b.dtype), b.data, b.row_stride, b.col_stride,
        static_cast<approxmul_dtype>(c.dtype), c.data, c.row_stride, c.col_stride));
    for (const View *v : {&a, &b, &c})
        if (v->impossible) expect(status != APPROXMUL_OK, "impossible view accepted");
    if (status != APPROXMUL_OK) {
        expect(c.storage == before, "output written by a failing call", status);
        return 0;
    }
    expect(valid, "operand dtype or value outside the multiplier accepted");
    if (rows == 0 || cols == 0) return 0;
    // a duplicate output element (zero stride) must have been refused
    const auto written = touched(c);
    int64_t distinct = 0;
    for (bool w : written) distinct += w;
    expect(distinct == rows * cols, "overlapping output accepted");
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
            expect(c.get(i, j) == m->product(a.get(i, j), b.get(i, j)),
                   "multiply result differs from model", static_cast<long long>(i * cols + j));
    return 0;
}
