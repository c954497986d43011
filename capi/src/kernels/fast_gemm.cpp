// Drivers of the instruction-set kernels (isa.hpp): tiling, packing,
// threads, exact accumulation and zero points. Portable code; only the
// micro-kernels they call differ per instruction set.
//
// int16_gemm: exact and factorized plans. M(a,b) = sum_r u_r(a) v_r(b)
// becomes one integer GEMM over an inner dimension of rank * inner: packing
// replaces A[i,k] by u_0..u_{rank-1} of its code and B[k,j] by v_0..v_{rank-1}
// (int16), pairs of that inner dimension go to vpdpwssd / vpmaddwd. The
// micro-kernel's int32 sums wrap modulo 2^32; they are exact because each
// block of inner steps whose true sum (a sum of products M) provably fits
// int32 is widened to int64 before the next block begins.
//
// table_gemm: arbitrary tables through the byte-plane table kernel, with the
// operand that keeps the longest rows streaming (transposing the problem and
// the table when the rows are the better stream).
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "../core/threads.hpp"
#include "common.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int threads_for(const MatmulProblem &p, int64_t jobs) {
    const int wanted = p.threads > 0 ? p.threads : num_threads();
    // Below a few hundred thousand products a parallel region costs more than it saves.
    if (p.rows * p.cols * std::max<int64_t>(p.inner, 1) < (int64_t{1} << 18)) return 1;
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted, jobs)));
}

MatrixView transposed(const MatrixView &v) {
    return MatrixView{v.name, v.dtype, v.data, v.cols, v.rows, v.col_stride, v.row_stride};
}

}  // namespace

bool int16_gemm(const KernelTable &kt, const MatmulProblem &p) {
    const Multiplier &m = *p.multiplier;
    if (m.bits() > 8 || (m.plan() != Plan::ExactGemm && m.plan() != Plan::Factorized))
        return false;
    const int64_t side = int64_t{1} << m.bits();
    int rank = 1;
    std::vector<int16_t> u, v;  // rank x side, by raw bit pattern
    if (m.plan() == Plan::ExactGemm) {
        u.resize(static_cast<size_t>(side));
        for (int64_t code = 0; code < side; ++code)
            u[code] = static_cast<int16_t>(m.is_signed() && code >= side / 2 ? code - side : code);
        v = u;
    } else {
        const Factorization &f = m.factorization();
        rank = f.rank;
        u.assign(f.u.begin(), f.u.end());  // fits int16: the plan says so
        v.assign(f.v.begin(), f.v.end());
    }
    const int64_t max_product = m.max_abs_product();
    const int64_t flush_inner =  // inner steps whose true sum fits int32
        max_product == 0 ? p.inner : std::numeric_limits<int32_t>::max() / max_product;
    if (flush_inner < 1) return false;

    const int64_t MR = kt.gemm_mr, NR = kt.gemm_nr;
    // inner steps per packed block: about 512 transformed values
    const int64_t kc = std::max<int64_t>(1, std::min({std::max<int64_t>(1, 512 / rank),
                                                      flush_inner, p.inner}));
    const int64_t blocks_per_flush = std::max<int64_t>(1, flush_inner / kc);
    const int64_t k_blocks = ceil_div(p.inner, kc);
    const bool wide = k_blocks > blocks_per_flush;  // int32 sums alone are not enough
    const int64_t kpairs_max = ceil_div(kc * rank, 2);

    // Jobs: column blocks first (each packs its own B block), rows split
    // only until there is enough parallel work.
    const int64_t mpanels = ceil_div(p.rows, MR), npanels = ceil_div(p.cols, NR);
    const int wanted = p.threads > 0 ? p.threads : num_threads();
    const int64_t target = 4 * static_cast<int64_t>(wanted);
    const int64_t ncp = std::clamp<int64_t>(ceil_div(npanels, target), 1, 512 / NR);
    const int64_t col_jobs = ceil_div(npanels, ncp);
    const int64_t row_split = col_jobs >= target ? 1 : ceil_div(target, col_jobs);
    const int64_t mcp = std::clamp<int64_t>(ceil_div(mpanels, row_split), 1,
                                            std::max<int64_t>(1, 256 / MR));
    const int64_t row_jobs = ceil_div(mpanels, mcp);
    const int64_t jobs = row_jobs * col_jobs;
    const int threads = threads_for(p, jobs);
    const CrossTerms cross(p.a, p.b, p.inner, p.a_zero_point, p.b_zero_point);
    const uint32_t mask = m.operand_mask();
    const int64_t ldc = ncp * NR;

    struct Workspace {
        std::vector<int16_t> a, b;
        std::vector<int32_t> c;
        std::vector<int64_t> wide;
    };
    std::vector<Workspace> workspaces(static_cast<size_t>(threads));
    parallel_for(jobs, threads, [&](int64_t job, int thread) {
        Workspace &w = workspaces[static_cast<size_t>(thread)];
        w.a.resize(static_cast<size_t>(mcp * MR * kpairs_max * 2));
        w.b.resize(static_cast<size_t>(ncp * NR * kpairs_max * 2));
        w.c.resize(static_cast<size_t>(mcp * MR * ldc));
        if (wide) w.wide.assign(static_cast<size_t>(mcp * MR * ldc), 0);
        const int64_t i0 = job / col_jobs * mcp * MR, j0 = job % col_jobs * ncp * NR;
        const int64_t ni = std::min(mcp * MR, p.rows - i0), nj = std::min(ncp * NR, p.cols - j0);
        const int64_t ip_count = ceil_div(ni, MR), jp_count = ceil_div(nj, NR);
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
            const int64_t k0 = kb * kc, nk = std::min(kc, p.inner - k0);
            const int64_t kpairs = ceil_div(nk * rank, 2);
            std::fill(w.a.begin(), w.a.end(), int16_t{0});
            std::fill(w.b.begin(), w.b.end(), int16_t{0});
            with_codes(p.a, mask, [&](auto code) {
                for (int64_t i = 0; i < ni; ++i) {
                    int16_t *panel = w.a.data() + (i / MR) * kpairs * MR * 2 + (i % MR) * 2;
                    for (int64_t k = 0; k < nk; ++k) {
                        const uint32_t x = code(i0 + i, k0 + k);
                        for (int r = 0; r < rank; ++r) {
                            const int64_t t = k * rank + r;
                            panel[(t >> 1) * MR * 2 + (t & 1)] = u[r * side + x];
                        }
                    }
                }
            });
            with_codes(p.b, mask, [&](auto code) {
                for (int64_t jp = 0; jp < ceil_div(nj, NR); ++jp) {
                    int16_t *panel = w.b.data() + jp * kpairs * NR * 2;
                    const int64_t jn = std::min(NR, nj - jp * NR), jb = j0 + jp * NR;
                    for (int64_t k = 0; k < nk; ++k)
                        for (int r = 0; r < rank; ++r) {
                            const int64_t t = k * rank + r;
                            int16_t *dst = panel + (t >> 1) * NR * 2 + (t & 1);
                            const int16_t *lut = v.data() + r * side;
                            for (int64_t j = 0; j < jn; ++j) dst[2 * j] = lut[code(k0 + k, jb + j)];
                        }
                }
            });
            const bool accumulate = kb % blocks_per_flush != 0;
            for (int64_t jp = 0; jp < jp_count; ++jp)
                for (int64_t ip = 0; ip < ip_count; ++ip)
                    kt.gemm_micro(kpairs, w.a.data() + ip * kpairs * MR * 2,
                                  w.b.data() + jp * kpairs * NR * 2,
                                  w.c.data() + ip * MR * ldc + jp * NR, ldc, accumulate);
            if (wide && (kb % blocks_per_flush == blocks_per_flush - 1 || kb == k_blocks - 1))
                for (int64_t i = 0; i < ni; ++i)
                    for (int64_t j = 0; j < nj; ++j) w.wide[i * ldc + j] += w.c[i * ldc + j];
        }
        for (int64_t i = 0; i < ni; ++i)
            for (int64_t j = 0; j < nj; ++j) {
                const int64_t sum = wide ? w.wide[i * ldc + j] : w.c[i * ldc + j];
                store_value(p.c, i0 + i, j0 + j, sum + cross(i0 + i, j0 + j));
            }
    });
    return true;
}

bool table_gemm(const KernelTable &kt, const MatmulProblem &p0) {
    const Multiplier &m = *p0.multiplier;
    if (m.plan() != Plan::Table || m.byte_planes(false).empty() || kt.table_block == nullptr)
        return false;
    const int64_t W = kt.table_width;
    // Stream the dimension that wastes least padding to whole W-wide blocks.
    const double col_use = static_cast<double>(p0.cols) / (ceil_div(p0.cols, W) * W);
    const double row_use = static_cast<double>(p0.rows) / (ceil_div(p0.rows, W) * W);
    const bool flip = row_use > col_use;
    MatmulProblem p = p0;
    if (flip) {  // C^T = B^T A^T with the table's operands swapped
        p.rows = p0.cols;
        p.cols = p0.rows;
        p.a = transposed(p0.b);
        p.b = transposed(p0.a);
        p.c = transposed(p0.c);
        p.a_zero_point = p0.b_zero_point;
        p.b_zero_point = p0.a_zero_point;
    }
    const uint8_t *planes = m.byte_planes(flip).data();
    const int64_t offset = m.byte_plane_offset();
    constexpr int64_t KC = 256;  // the kernel's 16-bit sums hold 256 steps

    const int wanted = p.threads > 0 ? p.threads : num_threads();
    const int64_t target = 4 * static_cast<int64_t>(wanted);
    const int64_t col_jobs = ceil_div(p.cols, W);
    const int64_t row_split = col_jobs >= target ? 1 : ceil_div(target, col_jobs);
    const int64_t rb = std::clamp<int64_t>(ceil_div(p.rows, row_split), 1, 256);
    const int64_t row_jobs = ceil_div(p.rows, rb);
    const int64_t jobs = row_jobs * col_jobs;
    const int threads = threads_for(p, jobs);
    const CrossTerms cross(p.a, p.b, p.inner, p.a_zero_point, p.b_zero_point);
    const uint32_t mask = m.operand_mask();

    struct Workspace {
        std::vector<uint8_t> x, s;
        std::vector<uint16_t> sums;
        std::vector<int64_t> acc;
    };
    std::vector<Workspace> workspaces(static_cast<size_t>(threads));
    parallel_for(jobs, threads, [&](int64_t job, int thread) {
        Workspace &w = workspaces[static_cast<size_t>(thread)];
        w.x.resize(static_cast<size_t>(KC * W));
        w.s.resize(static_cast<size_t>(KC));
        w.sums.resize(static_cast<size_t>(2 * W));
        w.acc.assign(static_cast<size_t>(rb * W), 0);
        const int64_t i0 = job / col_jobs * rb, j0 = job % col_jobs * W;
        const int64_t ni = std::min(rb, p.rows - i0), nj = std::min(W, p.cols - j0);
        for (int64_t k0 = 0; k0 < p.inner; k0 += KC) {
            const int64_t nk = std::min(KC, p.inner - k0);
            with_codes(p.b, mask, [&](auto code) {
                for (int64_t k = 0; k < nk; ++k) {
                    uint8_t *row = w.x.data() + k * W;
                    for (int64_t j = 0; j < nj; ++j) row[j] = static_cast<uint8_t>(code(k0 + k, j0 + j));
                    std::memset(row + nj, 0, static_cast<size_t>(W - nj));
                }
            });
            with_codes(p.a, mask, [&](auto code) {
                for (int64_t i = 0; i < ni; ++i) {
                    for (int64_t k = 0; k < nk; ++k)
                        w.s[k] = static_cast<uint8_t>(code(i0 + i, k0 + k));
                    kt.table_block(nk, w.s.data(), w.x.data(), W, planes, w.sums.data());
                    int64_t *acc = w.acc.data() + i * W;
                    for (int64_t j = 0; j < nj; ++j) {
                        const int64_t c = j >> 6, h = j & 1, word = (j & 63) >> 1;
                        const uint16_t *chunk = w.sums.data() + c * 128 + h * 32 + word;
                        acc[j] += int64_t{chunk[0]} + (int64_t{chunk[64]} << 8);
                    }
                }
            });
        }
        const int64_t total_offset = p.inner * offset;
        for (int64_t i = 0; i < ni; ++i)
            for (int64_t j = 0; j < nj; ++j)
                store_value(p.c, i0 + i, j0 + j,
                            w.acc[i * W + j] + total_offset + cross(i0 + i, j0 + j));
    });
    return true;
}

}  // namespace approxmul::kernels
