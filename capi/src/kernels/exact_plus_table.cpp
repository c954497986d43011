// exact_plus_table: wide models whose error lives in the operands' low
// bytes, M(a, b) = a b + E(lo(a), lo(b)) (column-truncated arrays of 9..16
// bits with cut <= 8), as two GEMMs through the dispatcher:
//
//     C = exact(A, B) with the problem's zero points + sum_k E(lo A, lo B),
//
// the first on the byte-split exact path (split_gemm.cpp), the second an
// unsigned 8-bit table GEMM of E on the low bytes (table_gemm.cpp, or a
// factorized plan when E has one). The zero points' cross terms belong to
// the exact part only: E is a function of the raw codes.
#include <memory>
#include <vector>

#include "common.hpp"
#include "drivers.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

namespace {

// The low bytes of a view's raw codes, rows x cols in memory order.
std::vector<uint8_t> low_bytes(const MatrixView &v, int threads) {
    std::vector<uint8_t> out(static_cast<size_t>(v.rows * v.cols));
    with_codes(v, 0xFF, [&](const auto &code) {
        parallel_for(v.rows, threads, [&](int64_t i, int) {
            uint8_t *row = out.data() + i * v.cols;
            for (int64_t j = 0; j < v.cols; ++j) row[j] = static_cast<uint8_t>(code(i, j));
        });
    });
    return out;
}

}  // namespace

bool exact_plus_table_gemm(const KernelTable &, const MatmulProblem &problem) {
    const Multiplier &m = *problem.multiplier;
    if (m.plan() != Plan::ExactPlusTable) return false;
    const int64_t rows = problem.rows, cols = problem.cols, inner = problem.inner;
    const int threads = threads_for(problem, rows);
    // the error part first, into scratch: a failure there leaves C untouched
    const std::vector<uint8_t> a_lo = low_bytes(problem.a, threads);
    const std::vector<uint8_t> b_lo = low_bytes(problem.b, threads);
    const size_t count = static_cast<size_t>(rows * cols);
    std::unique_ptr<int64_t[]> error(new int64_t[count > 0 ? count : 1]);
    MatmulProblem q = problem;
    q.multiplier = m.low_byte_error().get();
    q.a = MatrixView{problem.a.name, APPROXMUL_UINT8, a_lo.data(), rows, inner, inner, 1};
    q.b = MatrixView{problem.b.name, APPROXMUL_UINT8, b_lo.data(), inner, cols, cols, 1};
    q.c = MatrixView{problem.c.name, APPROXMUL_INT64, error.get(), rows, cols, cols, 1};
    q.a_zero_point = q.b_zero_point = 0;
    q.b_pack_cache = nullptr;
    q.a_row_sums = q.b_col_sums = nullptr;
    matmul(q);
    // then the exact part: an int64 C with rows in memory order holds it
    // (and the total), else int64 scratch does
    const bool in_place = problem.c.dtype == APPROXMUL_INT64 && problem.c.col_stride == 1;
    std::unique_ptr<int64_t[]> scratch(in_place ? nullptr : new int64_t[count > 0 ? count : 1]);
    const MatrixView total =
        in_place ? problem.c
                 : MatrixView{problem.c.name, APPROXMUL_INT64, scratch.get(), rows, cols, cols, 1};
    MatmulProblem e = problem;
    e.multiplier = m.exact_part().get();
    e.c = total;
    matmul(e);
    parallel_for(rows, threads, [&](int64_t i, int) {
        int64_t *t = static_cast<int64_t *>(const_cast<void *>(total.data)) + i * total.row_stride;
        const int64_t *d = error.get() + i * cols;
        for (int64_t j = 0; j < cols; ++j) t[j] += d[j];
        if (!in_place)
            for (int64_t j = 0; j < cols; ++j) store_value(problem.c, i, j, t[j]);
    });
    return true;
}

}  // namespace approxmul::kernels
