// split_gemm: products of operands or factors too wide for int16 pairs, as
// GEMMs on their bytes. With x = 2^8 hi(x) + lo(x) (lo in 0..255, hi the
// rest: negative for negative x),
//
//     u v = lo(u) lo(v) + 2^8 (hi(u) lo(v) + lo(u) hi(v)) + 2^16 hi(u) hi(v).
//
// An exact multiplier of 9..16 bits (u, v the operand values) splits the
// operands themselves: four exact 8-bit GEMMs on byte matrices, which take
// the byte paths (no lookup per packed element, vpdpbusd where the CPU has
// it). A factorized model whose factors exceed int16 (16-bit DRUM),
// M(a, b) = sum_r u_r(a) v_r(b), splits its factors: each part summed over r
// is a factorized multiplier (ranks r, 2r, r) whose factors fit int16, which
// int16_gemm runs through its factor tables. Either way the parts go to
// int64 scratch and are combined with their weights, and the zero points'
// cross terms are exact and linear, whatever M is.
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

// The bytes of an exact operand, stored as int8 so that every part is one
// exact signed 8-bit GEMM: lo - 128 with zero point -128 (the GEMM's a - z
// gives lo back); hi as is for signed operands, hi - 128 with zero point
// -128 for unsigned ones (hi in 0..255).
struct ByteSplit {
    std::vector<int8_t> hi, lo;  // row-major, the operand's shape
    std::vector<int64_t> sums;   // of each row (A) or column (B) of the values
    int64_t hi_zero = 0;
};

// Splits the values of view (rows x cols) into bytes; sums along rows
// (sum_rows: A's row sums) or columns (B's column sums).
ByteSplit split_bytes(const MatrixView &v, const Multiplier &m, bool sum_rows, int threads) {
    ByteSplit s;
    const int64_t rows = v.rows, cols = v.cols;
    s.hi.resize(static_cast<size_t>(rows * cols));
    s.lo.resize(static_cast<size_t>(rows * cols));
    s.sums.assign(static_cast<size_t>(sum_rows ? rows : cols), 0);
    s.hi_zero = m.is_signed() ? 0 : -128;
    // value = raw bits sign-extended from the multiplier's width (or not)
    const int shift = 32 - m.bits();
    const bool is_signed = m.is_signed();
    const uint32_t mask = m.operand_mask();
    const int32_t hi_zero = static_cast<int32_t>(s.hi_zero);
    auto split_row = [&](int64_t i, const auto &code) {
        int8_t *__restrict hi = s.hi.data() + i * cols;
        int8_t *__restrict lo = s.lo.data() + i * cols;
        int64_t row_sum = 0;
        for (int64_t j = 0; j < cols; ++j) {
            const uint32_t raw = code(j) & mask;
            const int32_t value = is_signed ? static_cast<int32_t>(raw << shift) >> shift
                                            : static_cast<int32_t>(raw);
            hi[j] = static_cast<int8_t>((value >> 8) + hi_zero);
            lo[j] = static_cast<int8_t>((value & 255) - 128);
            row_sum += value;
        }
        if (sum_rows) s.sums[static_cast<size_t>(i)] = row_sum;
    };
    if (v.col_stride == 1 && (v.dtype == APPROXMUL_INT16 || v.dtype == APPROXMUL_UINT16)) {
        // contiguous rows (the usual case): loads the compiler vectorises
        parallel_for(rows, threads, [&](int64_t i, int) {
            const uint16_t *row = static_cast<const uint16_t *>(v.data) + i * v.row_stride;
            split_row(i, [row](int64_t j) { return row[j]; });
        });
    } else {
        with_codes(v, mask, [&](auto code) {
            parallel_for(rows, threads, [&](int64_t i, int) {
                split_row(i, [&](int64_t j) { return code(i, j); });
            });
        });
    }
    if (!sum_rows)  // columns: from the bytes, in memory order
        for (int64_t i = 0; i < rows; ++i) {
            const int8_t *hi = s.hi.data() + i * cols, *lo = s.lo.data() + i * cols;
            int64_t *__restrict sums = s.sums.data();
            for (int64_t j = 0; j < cols; ++j) sums[j] += 256 * (hi[j] - hi_zero) + (lo[j] + 128);
        }
    return s;
}

// An exact multiplier of 9..16 bits: the four byte GEMMs, folded as they
// come into one int64 matrix (two of them in memory, not four),
//   C = 2^8 (2^8 HH + HL + LH) + LL - b_zero rowsum(A) - a_zero colsum(B) + K a_zero b_zero.
bool exact_byte_gemms(const MatmulProblem &problem) {
    const Multiplier &m = *problem.multiplier;
    const int64_t rows = problem.rows, cols = problem.cols, inner = problem.inner;
    const int threads = threads_for(problem, rows);
    const ByteSplit a = split_bytes(problem.a, m, true, threads);
    const ByteSplit b = split_bytes(problem.b, m, false, threads);
    static const std::shared_ptr<const Multiplier> exact8 = Multiplier::exact(8, true);
    // not zero-filled: every GEMM writes its whole output
    const size_t count = static_cast<size_t>(rows * cols);
    std::unique_ptr<int64_t[]> total(new int64_t[count]), part(new int64_t[count]);
    const int64_t za = problem.a_zero_point, zb = problem.b_zero_point;
    for (int step = 0; step < 4; ++step) {  // HH, HL, LH, LL
        const bool a_hi = step < 2, b_hi = step % 2 == 0;
        MatmulProblem q = problem;
        q.multiplier = exact8.get();
        q.a = MatrixView{problem.a.name, APPROXMUL_INT8, (a_hi ? a.hi : a.lo).data(), rows, inner,
                         inner, 1};
        q.b = MatrixView{problem.b.name, APPROXMUL_INT8, (b_hi ? b.hi : b.lo).data(), inner, cols,
                         cols, 1};
        q.c = MatrixView{problem.c.name, APPROXMUL_INT64, (step == 0 ? total : part).get(), rows,
                         cols, cols, 1};
        q.a_zero_point = a_hi ? a.hi_zero : -128;
        q.b_zero_point = b_hi ? b.hi_zero : -128;
        q.b_pack_cache = nullptr;
        q.a_row_sums = q.b_col_sums = nullptr;
        matmul(q);
        if (step == 0) continue;
        parallel_for(rows, threads, [&](int64_t i, int) {
            int64_t *__restrict t = total.get() + i * cols;
            const int64_t *__restrict p = part.get() + i * cols;
            if (step == 1) {
                for (int64_t j = 0; j < cols; ++j) t[j] = 256 * t[j] + p[j];
            } else if (step == 2) {
                for (int64_t j = 0; j < cols; ++j) t[j] += p[j];
            } else {
                const int64_t row_term = inner * za * zb - zb * a.sums[static_cast<size_t>(i)];
                for (int64_t j = 0; j < cols; ++j)
                    store_value(problem.c, i, j, 256 * t[j] + p[j] + row_term -
                                                     za * b.sums[static_cast<size_t>(j)]);
            }
        });
    }
    return true;
}

}  // namespace

bool split_gemm(const KernelTable &kernels, const MatmulProblem &problem) {
    const Multiplier &m = *problem.multiplier;
    const bool exact = m.plan() == Plan::ExactGemm && m.bits() > 8;
    const bool wide_factors = m.plan() == Plan::Factorized && !m.factors_fit_int16();
    if (!exact && !wide_factors) return false;
    if (exact) return exact_byte_gemms(problem);
    const Parts &parts = m.split_parts();
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
