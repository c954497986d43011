// split_gemm: products of operands or factors too wide for int16 pairs, as
// GEMMs on their bytes. With x = 2^8 hi(x) + lo(x) (lo in 0..255, hi the
// rest: negative for negative x),
//
//     u v = lo(u) lo(v) + 2^8 (hi(u) lo(v) + lo(u) hi(v)) + 2^16 hi(u) hi(v).
//
// An exact multiplier of 9..16 bits (u, v the operand values), and a
// rank-1 factorized one whose factors span at most 16 bits (16-bit DRUM;
// u, v the factors), split u and v themselves: three exact 8-bit GEMMs on
// byte matrices (the middle one over twice the inner size), which take the
// byte paths (no lookup per packed element, vpdpbusd where the CPU has it).
// Factorizations of rank 2 or 3 whose factors exceed int16,
// M(a, b) = sum_r u_r(a) v_r(b), split their factors in the multiplier
// instead: each part summed over r is a factorized multiplier (ranks r, 2r,
// r) whose factors fit int16, which int16_gemm runs through its factor
// tables. Either way the parts go to int64 scratch and are combined with
// their weights, and the zero points' cross terms are exact and linear,
// whatever M is.
#include <array>
#include <memory>
#include <vector>

#include "../core/error.hpp"
#include "common.hpp"
#include "drivers.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

namespace {

using Parts = Multiplier::SplitParts;

// An operand's bytes. Each code stands for w = f + offset in 0..65535, f
// its value (exact plans: signed values move by 2^(bits-1)) or its factor
// (rank-1 factorized plans: through a table, offset -min f), so both bytes
// of w are in 0..255; the offset acts as a zero point, f = w - offset. The
// bytes are stored as int8, byte - 128, which an exact signed 8-bit GEMM
// with zero point -128 turns back into the byte. A is rows x [hi | lo] (row
// stride 2 inner), B is [lo ; hi] x cols, so that the middle part
// sum hi(a) lo(b) + lo(a) hi(b) is one GEMM over 2 inner steps.
struct ByteSplit {
    std::vector<int8_t> bytes;
    // sums of the stored bytes along each row (A) or column (B): the byte
    // GEMMs' zero-point cross terms, given to them so they do not sum again
    std::vector<int64_t> hi_sums, lo_sums;
    // sum of w along the same line, from the bytes: 2^8 (hi + 128 n) + lo + 128 n
    int64_t value_sum(size_t x, int64_t n) const {
        return 256 * (hi_sums[x] + 128 * n) + lo_sums[x] + 128 * n;
    }
};

// How an operand's codes become w: by mask and offset, or through lut.
struct ByteMap {
    uint32_t mask, offset;
    const uint16_t *lut;  // nullptr: ((code & mask) + offset) & mask
};

// Splits view (rows x cols); A's layout with sum_rows, else B's.
ByteSplit split_bytes(const KernelTable &kt, const MatrixView &v, const ByteMap &map,
                      bool sum_rows, int threads) {
    ByteSplit s;
    const int64_t rows = v.rows, cols = v.cols;
    s.bytes.resize(static_cast<size_t>(2 * rows * cols));
    const uint32_t mask = map.mask;
    // B's column sums: int32 partial sums per thread over runs of rows
    // (|byte| <= 128, so 32767 rows cannot overflow), added up after each run
    constexpr int64_t kRowsPerPart = 32767;
    const int64_t parts = sum_rows ? 1 : std::max<int64_t>(1, ceil_div(rows, kRowsPerPart));
    const size_t part_size = static_cast<size_t>(sum_rows ? 0 : threads * cols);
    std::vector<int32_t> part_hi(part_size), part_lo(part_size);
    std::vector<int64_t> row_hi(static_cast<size_t>(rows)), row_lo(static_cast<size_t>(rows));
    s.hi_sums.assign(static_cast<size_t>(sum_rows ? rows : cols), 0);
    s.lo_sums.assign(s.hi_sums.size(), 0);
    // 16-bit rows in memory order go to the kernel as they are; others are gathered
    const bool contiguous = cols > 0 && v.col_stride == 1 &&
                            (v.dtype == APPROXMUL_INT16 || v.dtype == APPROXMUL_UINT16);
    std::vector<std::vector<uint16_t>> gathered(
        static_cast<size_t>(contiguous ? 0 : threads), std::vector<uint16_t>(static_cast<size_t>(cols)));
    for (int64_t part = 0; part < parts; ++part) {
        const int64_t r0 = part * kRowsPerPart;
        const int64_t r1 = sum_rows ? rows : std::min(rows, r0 + kRowsPerPart);
        std::fill(part_hi.begin(), part_hi.end(), 0);
        std::fill(part_lo.begin(), part_lo.end(), 0);
        parallel_for(r1 - r0, threads, [&](int64_t t, int thread) {
            const int64_t i = r0 + t;
            int8_t *hi = sum_rows ? s.bytes.data() + i * 2 * cols : s.bytes.data() + (rows + i) * cols;
            int8_t *lo = sum_rows ? hi + cols : s.bytes.data() + i * cols;
            const uint16_t *src;
            if (contiguous) {
                src = static_cast<const uint16_t *>(v.data) + i * v.row_stride;
            } else {  // the row's codes gathered into this thread's scratch first
                std::vector<uint16_t> &row = gathered[static_cast<size_t>(thread)];
                with_codes(v, mask, [&](auto code) {
                    for (int64_t j = 0; j < cols; ++j)
                        row[static_cast<size_t>(j)] = static_cast<uint16_t>(code(i, j));
                });
                src = row.data();
            }
            int64_t &hs = row_hi[static_cast<size_t>(i)], &ls = row_lo[static_cast<size_t>(i)];
            hs = ls = 0;
            kt.byte_split(cols, src, mask, map.offset, map.lut, hi, lo, &hs, &ls,
                          sum_rows ? nullptr : part_hi.data() + thread * cols,
                          sum_rows ? nullptr : part_lo.data() + thread * cols);
        });
        for (size_t x = 0; x < part_size; ++x) {
            s.hi_sums[x % static_cast<size_t>(cols)] += part_hi[x];
            s.lo_sums[x % static_cast<size_t>(cols)] += part_lo[x];
        }
    }
    if (sum_rows) s.hi_sums = std::move(row_hi), s.lo_sums = std::move(row_lo);
    return s;
}

// A rank-1 factor table moved into 0..65535: the uint16 table of w and its
// offset, or false when the factors span more than 16 bits.
bool byte_factors(const std::vector<int64_t> &f, std::vector<uint16_t> &lut, int64_t &offset) {
    const auto [lo, hi] = std::minmax_element(f.begin(), f.end());
    if (f.empty() || *hi - *lo > 65535) return false;
    offset = -*lo;
    lut.resize(f.size());
    for (size_t x = 0; x < f.size(); ++x) lut[x] = static_cast<uint16_t>(f[x] + offset);
    return true;
}

// An exact multiplier of 9..16 bits, or a rank-1 factorized one whose
// factors span at most 16 bits (16-bit DRUM): three byte GEMMs (HH, the
// middle part over 2 inner steps, LL) of the w, folded into one int64
// matrix as they come,
//   S = 2^8 (2^8 HH + HL + LH) + LL - ob rowsum(w_A) - oa colsum(w_B) + K oa ob
// with oa, ob the offsets (exact plans: plus the problem's zero points,
// whose cross terms are then included; factorized ones add those of the codes).
bool byte_gemms(const KernelTable &kt, const MatmulProblem &problem) {
    const Multiplier &m = *problem.multiplier;
    const bool exact = m.plan() == Plan::ExactGemm;
    const uint32_t mask = m.operand_mask();
    ByteMap a_map{mask, 0, nullptr}, b_map{mask, 0, nullptr};
    std::vector<uint16_t> a_lut, b_lut;
    int64_t oa, ob;
    if (exact) {
        a_map.offset = b_map.offset = m.is_signed() ? (mask >> 1) + 1 : 0;
        oa = problem.a_zero_point + a_map.offset, ob = problem.b_zero_point + b_map.offset;
    } else {
        const Factorization &f = m.factorization();
        if (f.rank != 1 || !byte_factors(f.u, a_lut, oa) || !byte_factors(f.v, b_lut, ob))
            return false;
        a_map.lut = a_lut.data(), b_map.lut = b_lut.data();
    }
    const int64_t rows = problem.rows, cols = problem.cols, inner = problem.inner;
    if (rows == 0 || cols == 0 || inner == 0) {  // empty sums (and no pointers into empty bytes)
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j) store_value(problem.c, i, j, 0);
        return true;
    }
    const int threads = threads_for(problem, rows);
    const ByteSplit a = split_bytes(kt, problem.a, a_map, true, threads);
    const ByteSplit b = split_bytes(kt, problem.b, b_map, false, threads);
    // a factorized plan's zero points act on the codes, not on the factors
    const CrossTerms cross(exact ? MatmulProblem{} : problem);
    static const std::shared_ptr<const Multiplier> exact8 = Multiplier::exact(8, true);
    // not zero-filled: every GEMM writes its whole output. An int64 C with
    // rows in memory order holds the running total itself.
    const size_t count = static_cast<size_t>(rows * cols);
    const bool in_place = problem.c.dtype == APPROXMUL_INT64 && problem.c.col_stride == 1;
    std::unique_ptr<int64_t[]> scratch(in_place ? nullptr : new int64_t[count]);
    std::unique_ptr<int64_t[]> part(new int64_t[count]);
    const MatrixView total_view =
        in_place ? problem.c
                 : MatrixView{problem.c.name, APPROXMUL_INT64, scratch.get(), rows, cols, cols, 1};
    auto total_row = [&](int64_t i) {
        return static_cast<int64_t *>(const_cast<void *>(total_view.data)) + i * total_view.row_stride;
    };
    const int8_t *a_hi = a.bytes.data(), *a_lo = a_hi + inner;
    const int8_t *b_lo = b.bytes.data(), *b_hi = b_lo + inner * cols;
    std::vector<int64_t> col_values(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j)
        col_values[static_cast<size_t>(j)] = oa * b.value_sum(static_cast<size_t>(j), inner);
    // per part: A rows' and B columns' byte sums (the middle part's are both halves')
    std::vector<int64_t> a_mid(a.hi_sums.size()), b_mid(b.hi_sums.size());
    for (size_t i = 0; i < a_mid.size(); ++i) a_mid[i] = a.hi_sums[i] + a.lo_sums[i];
    for (size_t j = 0; j < b_mid.size(); ++j) b_mid[j] = b.hi_sums[j] + b.lo_sums[j];
    struct Step {
        const int8_t *a, *b;
        int64_t inner;
        const int64_t *a_sums, *b_sums;
    };
    const Step steps[3] = {{a_hi, b_hi, inner, a.hi_sums.data(), b.hi_sums.data()},
                           {a_hi, b_lo, 2 * inner, a_mid.data(), b_mid.data()},
                           {a_lo, b_lo, inner, a.lo_sums.data(), b.lo_sums.data()}};
    for (int step = 0; step < 3; ++step) {
        MatmulProblem q = problem;
        q.multiplier = exact8.get();
        q.inner = steps[step].inner;
        q.a = MatrixView{problem.a.name, APPROXMUL_INT8, steps[step].a, rows, q.inner, 2 * inner, 1};
        q.b = MatrixView{problem.b.name, APPROXMUL_INT8, steps[step].b, q.inner, cols, cols, 1};
        q.c = step == 0 ? total_view
                        : MatrixView{problem.c.name, APPROXMUL_INT64, part.get(), rows, cols, cols, 1};
        q.a_zero_point = q.b_zero_point = -128;
        q.b_pack_cache = nullptr;
        q.a_row_sums = steps[step].a_sums;
        q.b_col_sums = steps[step].b_sums;
        matmul(q);
        if (step == 0) continue;
        parallel_for(rows, threads, [&](int64_t i, int) {
            int64_t *__restrict t = total_row(i);
            const int64_t *__restrict p = part.get() + i * cols;
            if (step == 1) {
                for (int64_t j = 0; j < cols; ++j) t[j] = 256 * t[j] + p[j];
                return;
            }
            const int64_t row_term =
                inner * oa * ob - ob * a.value_sum(static_cast<size_t>(i), inner);
            const int64_t *__restrict col = col_values.data();
            for (int64_t j = 0; j < cols; ++j) t[j] = 256 * t[j] + p[j] + row_term - col[j];
            if (!exact)
                for (int64_t j = 0; j < cols; ++j) t[j] += cross(i, j);
            if (!in_place)
                for (int64_t j = 0; j < cols; ++j) store_value(problem.c, i, j, t[j]);
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
    if (byte_gemms(kernels, problem)) return true;
    if (exact) fail(APPROXMUL_ERR_INTERNAL, "split_gemm: no byte GEMMs for an exact plan");
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
