// split_gemm: exact products of 9..16-bit operands as three int16 GEMMs on
// their bytes. With a = 2^8 a_h + a_l (a_l in 0..255, a_h the rest: signed
// for two's-complement operands), likewise b,
//
//     a b = a_l b_l + 2^8 (a_h b_l + a_l b_h) + 2^16 a_h b_h,
//
// each part a factorized multiplier (ranks 1, 2, 1) whose factors are bytes,
// so int16_gemm runs it with int32 sums over hundreds of inner steps. The
// parts go to int64 scratch and are combined with their weights; the zero
// points' cross terms ride on the first part (they are exact and linear).
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

using Parts = std::array<std::shared_ptr<const Multiplier>, 3>;

Parts make_parts(int bits, bool is_signed) {
    const int64_t side = int64_t{1} << bits;
    auto value = [&](int64_t code) { return is_signed && code >= side / 2 ? code - side : code; };
    auto lo = [](int64_t x) { return x & 0xff; };
    auto hi = [](int64_t x) { return (x - (x & 0xff)) / 256; };  // exact: floor division
    std::vector<int64_t> low(static_cast<size_t>(side)), high(static_cast<size_t>(side));
    for (int64_t code = 0; code < side; ++code) {
        low[size_t(code)] = lo(value(code));
        high[size_t(code)] = hi(value(code));
    }
    auto factors = [&](std::vector<std::vector<int64_t>> u, std::vector<std::vector<int64_t>> v) {
        Factorization f;
        f.rank = static_cast<int>(u.size());
        for (size_t r = 0; r < u.size(); ++r) {
            f.u.insert(f.u.end(), u[r].begin(), u[r].end());
            f.v.insert(f.v.end(), v[r].begin(), v[r].end());
        }
        return f;
    };
    Parts parts;
    parts[0] = Multiplier::from_function([=](int64_t a, int64_t b) { return lo(a) * lo(b); }, bits,
                                         is_signed, "exact low bytes", factors({low}, {low}));
    parts[1] = Multiplier::from_function(
        [=](int64_t a, int64_t b) { return hi(a) * lo(b) + lo(a) * hi(b); }, bits, is_signed,
        "exact cross bytes", factors({high, low}, {low, high}));
    parts[2] = Multiplier::from_function([=](int64_t a, int64_t b) { return hi(a) * hi(b); }, bits,
                                         is_signed, "exact high bytes", factors({high}, {high}));
    return parts;
}

// Built once per width and signedness, on first use.
const Parts &parts_of(int bits, bool is_signed) {
    static std::array<std::array<std::once_flag, 2>, kMaxBits + 1> once;
    static std::array<std::array<Parts, 2>, kMaxBits + 1> parts;
    std::call_once(once[size_t(bits)][is_signed],
                   [&] { parts[size_t(bits)][is_signed] = make_parts(bits, is_signed); });
    return parts[size_t(bits)][is_signed];
}

}  // namespace

bool split_gemm(const KernelTable &kernels, const MatmulProblem &problem) {
    const Multiplier &m = *problem.multiplier;
    if (m.plan() != Plan::ExactGemm || m.bits() <= 8) return false;
    const Parts &parts = parts_of(m.bits(), m.is_signed());
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
