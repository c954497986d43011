#include "drivers.hpp"

#include <algorithm>

#include "../core/error.hpp"
#include "../core/threads.hpp"

namespace approxmul::kernels {

int wanted_threads(const MatmulProblem &p) { return p.threads > 0 ? p.threads : num_threads(); }

int threads_for(const MatmulProblem &p, int64_t jobs) {
    if (p.rows * p.cols * std::max<int64_t>(p.inner, 1) < (int64_t{1} << 18)) return 1;
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted_threads(p), jobs)));
}

namespace {

MatrixView transposed(const MatrixView &v) {
    return MatrixView{v.name, v.dtype, v.data, v.cols, v.rows, v.col_stride, v.row_stride};
}

}  // namespace

MatmulProblem transposed_problem(const MatmulProblem &p) {
    MatmulProblem t = p;
    t.rows = p.cols;
    t.cols = p.rows;
    t.a = transposed(p.b);
    t.b = transposed(p.a);
    t.c = transposed(p.c);
    t.a_zero_point = p.b_zero_point;
    t.b_zero_point = p.a_zero_point;
    t.a_row_sums = p.b_col_sums;
    t.b_col_sums = p.a_row_sums;
    return t;
}

}  // namespace approxmul::kernels
