// split_gemm: products of operands or factors too wide for int16 pairs, as
// three int16 GEMMs on their bytes. An exact multiplier of 9..16 bits is
// the factorization M(a, b) = a b (rank 1); a factorized model whose factors
// exceed int16 (16-bit DRUM) is M(a, b) = sum_r u_r(a) v_r(b). With
// x = 2^8 hi(x) + lo(x) (lo in 0..255, hi the rest: negative for negative x),
//
//     u v = lo(u) lo(v) + 2^8 (hi(u) lo(v) + lo(u) hi(v)) + 2^16 hi(u) hi(v),
//
// each part summed over r is a factorized multiplier (ranks r, 2r, r) whose
// factors fit int16, so int16_gemm runs it with int32 sums over many inner
// steps. The parts go to int64 scratch and are combined with their weights;
// the zero points' cross terms ride on the first part (they are exact and
// linear, whatever M is).
#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "../core/error.hpp"
#include "common.hpp"
#include "drivers.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

namespace {

using Parts = Multiplier::SplitParts;

// a * b as a rank-1 factorization: each factor is the operand's value
Factorization exact_factors(int bits, bool is_signed) {
    const int64_t side = int64_t{1} << bits;
    Factorization f;
    f.rank = 1;
    for (int64_t code = 0; code < side; ++code)
        f.u.push_back(is_signed && code >= side / 2 ? code - side : code);
    f.v = f.u;
    return f;
}

// Exact parts are built once per width and signedness, on first use.
const Parts &exact_parts(int bits, bool is_signed) {
    static std::array<std::array<std::once_flag, 2>, kMaxBits + 1> once;
    static std::array<std::array<Parts, 2>, kMaxBits + 1> parts;
    std::call_once(once[size_t(bits)][is_signed], [&] {
        parts[size_t(bits)][is_signed] =
            Multiplier::make_split_parts(exact_factors(bits, is_signed), bits, is_signed);
    });
    return parts[size_t(bits)][is_signed];
}

}  // namespace

bool split_gemm(const KernelTable &kernels, const MatmulProblem &problem) {
    const Multiplier &m = *problem.multiplier;
    const bool exact = m.plan() == Plan::ExactGemm && m.bits() > 8;
    const bool wide_factors = m.plan() == Plan::Factorized && !m.factors_fit_int16();
    if (!exact && !wide_factors) return false;
    const Parts &parts = exact ? exact_parts(m.bits(), m.is_signed()) : m.split_parts();
    for (const auto &part : parts)
        if (part->plan() != Plan::Factorized) return false;  // factors not in int16 (cannot happen)
    const int64_t rows = problem.rows, cols = problem.cols;
    std::array<std::vector<int64_t>, 3> sums;
    for (size_t k = 0; k < parts.size(); ++k) {
        sums[k].resize(static_cast<size_t>(rows * cols));
        MatmulProblem q = problem;
        q.multiplier = parts[k].get();
        q.c = MatrixView{problem.c.name, APPROXMUL_INT64, sums[k].data(), rows, cols, cols, 1};
        if (k > 0) q.a_zero_point = q.b_zero_point = 0;
        if (!int16_gemm(kernels, q)) {
            if (k == 0) return false;  // nothing written yet
            fail(APPROXMUL_ERR_INTERNAL, "split_gemm: the int16 GEMM declined part %zu", k);
        }
    }
    const int threads = threads_for(problem, rows);
    parallel_for(rows, threads, [&](int64_t i, int) {
        for (int64_t j = 0; j < cols; ++j) {
            const size_t at = static_cast<size_t>(i * cols + j);
            store_value(problem.c, i, j, sums[0][at] + 256 * sums[1][at] + 65536 * sums[2][at]);
        }
    });
    return true;
}

}  // namespace approxmul::kernels
