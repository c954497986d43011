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
#include <cstdlib>
#include <cstring>
#include <utility>
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

// C^T = B^T A^T: the same products with the operands' roles swapped, so a
// kernel can put whichever operand suits it first. A multiplier's operands
// swap with them (the callers pick the table or factors of the other side).
MatmulProblem transposed_problem(const MatmulProblem &p) {
    MatmulProblem t = p;
    t.rows = p.cols;
    t.cols = p.rows;
    t.a = transposed(p.b);
    t.b = transposed(p.a);
    t.c = transposed(p.c);
    t.a_zero_point = p.b_zero_point;
    t.b_zero_point = p.a_zero_point;
    return t;
}

// The per-operand factors of an exact or factorized plan, indexed by raw bit
// pattern: M(a, b) = sum_r u[r][a] * v[r][b] (rank 1, u = v = value for exact).
int operand_factors(const Multiplier &m, std::vector<int16_t> &u, std::vector<int16_t> &v) {
    const int64_t side = int64_t{1} << m.bits();
    if (m.plan() == Plan::ExactGemm) {
        u.resize(static_cast<size_t>(side));
        for (int64_t code = 0; code < side; ++code)
            u[code] = static_cast<int16_t>(m.is_signed() && code >= side / 2 ? code - side : code);
        v = u;
        return 1;
    }
    const Factorization &f = m.factorization();
    u.assign(f.u.begin(), f.u.end());  // fits int16: the plan says so
    v.assign(f.v.begin(), f.v.end());
    return f.rank;
}

}  // namespace

bool int16_gemm(const KernelTable &kt, const MatmulProblem &p0) {
    const Multiplier &m = *p0.multiplier;
    if (m.bits() > 8 || (m.plan() != Plan::ExactGemm && m.plan() != Plan::Factorized))
        return false;
    // The micro-kernel's tile is MR rows x NR (2 vectors) columns: put the
    // longer dimension on the columns when the padding says so (conv2d's
    // pixels x 16 channels would otherwise fill half of every vector).
    auto padded = [&](int64_t rows, int64_t cols) {
        return ceil_div(rows, kt.gemm_mr) * kt.gemm_mr * ceil_div(cols, kt.gemm_nr) * kt.gemm_nr;
    };
    // Only for a clear saving: the packing of a transposed operand is slower
    // (a 64 x 3136 problem flipped on AVX2 to save 3 % padding ran 3x slower).
    const bool flip = padded(p0.cols, p0.rows) * 5 < padded(p0.rows, p0.cols) * 4;
    const MatmulProblem p = flip ? transposed_problem(p0) : p0;
    const int64_t side = int64_t{1} << m.bits();
    std::vector<int16_t> u, v;  // rank x side, by raw bit pattern
    const int rank = operand_factors(m, u, v);
    if (flip) std::swap(u, v);
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
        std::vector<int64_t> wide, col_term;
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
            // Exact 8-bit codes in contiguous rows: the transform is a plain
            // widening, which the compiler vectorises (no table lookups).
            const bool plain_b = m.plan() == Plan::ExactGemm && m.bits() == 8 &&
                                 p.b.col_stride == 1 &&
                                 (p.b.dtype == APPROXMUL_UINT8 || p.b.dtype == APPROXMUL_INT8);
            if (plain_b) {
                const auto *base = static_cast<const uint8_t *>(p.b.data);
                const bool sign = m.is_signed();
                for (int64_t jp = 0; jp < jp_count; ++jp) {
                    int16_t *panel = w.b.data() + jp * kpairs * NR * 2;
                    const int64_t jn = std::min(NR, nj - jp * NR), jb = j0 + jp * NR;
                    for (int64_t k = 0; k < nk; ++k) {
                        int16_t *dst = panel + (k >> 1) * NR * 2 + (k & 1);
                        const uint8_t *src = base + (k0 + k) * p.b.row_stride + jb;
                        if (sign)
                            for (int64_t j = 0; j < jn; ++j)
                                dst[2 * j] = static_cast<int16_t>(static_cast<int8_t>(src[j]));
                        else
                            for (int64_t j = 0; j < jn; ++j) dst[2 * j] = src[j];
                    }
                }
            } else
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
        if (wide)
            store_block(p.c, cross, 0, i0, j0, ni, nj, w.wide.data(), ldc, w.col_term);
        else
            store_block(p.c, cross, 0, i0, j0, ni, nj, w.c.data(), ldc, w.col_term);
    });
    return true;
}

namespace {

// dst[r * ld + c] = code of v[r0 + r, c0 + c], r < nr, c < nc: the order of
// the two loops follows the view's shorter stride, and 8-bit rows that are
// contiguous are copied whole.
void pack_codes(const MatrixView &v, uint32_t mask, int64_t r0, int64_t nr, int64_t c0,
                int64_t nc, uint8_t *dst, int64_t ld) {
    const bool bytes = v.dtype == APPROXMUL_UINT8 || v.dtype == APPROXMUL_INT8;
    if (bytes && mask == 0xff && v.col_stride == 1) {
        const auto *base = static_cast<const uint8_t *>(v.data);
        for (int64_t r = 0; r < nr; ++r)
            std::memcpy(dst + r * ld, base + (r0 + r) * v.row_stride + c0, static_cast<size_t>(nc));
        return;
    }
    if (bytes && mask == 0xff && v.row_stride == 1) {
        // a transposed byte matrix (the flipped problem's operand): 8x8 byte
        // blocks, each source column's 8 bytes read as one word and the
        // block transposed in registers (the per-element path below ran a
        // 256x2304x196 table GEMM a third slower)
        const auto *base = static_cast<const uint8_t *>(v.data) + r0 + c0 * v.col_stride;
        const int64_t nr8 = nr / 8 * 8, nc8 = nc / 8 * 8;
        for (int64_t c = 0; c < nc8; c += 8)
            for (int64_t r = 0; r < nr8; r += 8) {
                uint64_t x[8];
                for (int t = 0; t < 8; ++t) std::memcpy(&x[t], base + (c + t) * v.col_stride + r, 8);
                // x[t] byte i = element (r + i, c + t) -> x[i] byte t
                for (int t = 0; t < 8; t += 2) {
                    const uint64_t d = ((x[t] >> 8) ^ x[t + 1]) & 0x00FF00FF00FF00FFull;
                    x[t + 1] ^= d, x[t] ^= d << 8;
                }
                for (int t : {0, 1, 4, 5}) {
                    const uint64_t d = ((x[t] >> 16) ^ x[t + 2]) & 0x0000FFFF0000FFFFull;
                    x[t + 2] ^= d, x[t] ^= d << 16;
                }
                for (int t = 0; t < 4; ++t) {
                    const uint64_t d = ((x[t] >> 32) ^ x[t + 4]) & 0x00000000FFFFFFFFull;
                    x[t + 4] ^= d, x[t] ^= d << 32;
                }
                for (int t = 0; t < 8; ++t) std::memcpy(dst + (r + t) * ld + c, &x[t], 8);
            }
        for (int64_t r = 0; r < nr; ++r)  // edges
            for (int64_t c = r < nr8 ? nc8 : 0; c < nc; ++c)
                dst[r * ld + c] = base[c * v.col_stride + r];
        return;
    }
    with_codes(v, mask, [&](auto code) {
        if (std::llabs(v.col_stride) <= std::llabs(v.row_stride)) {
            for (int64_t r = 0; r < nr; ++r)
                for (int64_t c = 0; c < nc; ++c)
                    dst[r * ld + c] = static_cast<uint8_t>(code(r0 + r, c0 + c));
        } else {
            for (int64_t c = 0; c < nc; ++c)
                for (int64_t r = 0; r < nr; ++r)
                    dst[r * ld + c] = static_cast<uint8_t>(code(r0 + r, c0 + c));
        }
    });
}

}  // namespace


// Product-table order (kt.pt_block): the shorter dimension is stationary in
// blocks of pt_rows, the longer one streams; each job precomputes
// 256 x pt_rows products per inner step and reuses them over its columns.
// Chosen over the weight-stationary kernel when the streamed length
// amortises that precompute (kt.pt_min_stream, measured per set), or
// always/never with APPROXMUL_TABLE_ORDER=product|stationary (tests).
bool table_pt_gemm(const KernelTable &kt, const MatmulProblem &p0) {
    const Multiplier &m = *p0.multiplier;
    if (kt.pt_block == nullptr || m.plan() != Plan::Table || m.wide_planes(false).empty() ||
        p0.rows == 0 || p0.cols == 0)
        return false;
    const bool flip = p0.rows > p0.cols;  // stream the longer dimension
    const int64_t stream = flip ? p0.rows : p0.cols;
    const char *order = std::getenv("APPROXMUL_TABLE_ORDER");
    if (order != nullptr && std::strcmp(order, "stationary") == 0) return false;
    const bool forced = order != nullptr && std::strcmp(order, "product") == 0;
    if (!forced && stream < kt.pt_min_stream) return false;
    const MatmulProblem p = flip ? transposed_problem(p0) : p0;
    const uint16_t *wide_planes = m.wide_planes(flip).data();
    const int64_t offset = m.byte_plane_offset();
    const uint32_t mask = m.operand_mask();
    const int64_t R = kt.pt_rows;
    constexpr int64_t KC = 256;            // codes packed per inner block
    constexpr int64_t FlushSteps = 65536;  // uint32 sums of values < 2^16 hold 65537 steps
    const bool wide = p.inner > FlushSteps;
    const int wanted = p.threads > 0 ? p.threads : num_threads();
    // Jobs: the row blocks shared out among the threads, each job streaming
    // its columns once per inner block for all of its row blocks (the
    // streamed codes are packed once per job, not once per row block);
    // columns split only when there are fewer row blocks than threads.
    const int64_t row_blocks = ceil_div(p.rows, R);
    const int64_t row_jobs = std::min<int64_t>(row_blocks, wanted);
    const int64_t blocks_per_job = ceil_div(row_blocks, row_jobs);
    const int64_t col_split =
        row_jobs >= wanted ? 1 : std::min<int64_t>(ceil_div(wanted, row_jobs), ceil_div(p.cols, 64));
    const int64_t CB = ceil_div(ceil_div(p.cols, col_split), 8) * 8;
    const int64_t col_jobs = ceil_div(p.cols, CB);
    const int64_t jobs = ceil_div(row_blocks, blocks_per_job) * col_jobs;
    const int threads = threads_for(p, jobs);
    const CrossTerms cross(p.a, p.b, p.inner, p.a_zero_point, p.b_zero_point);
    const bool b_bytes = (p.b.dtype == APPROXMUL_UINT8 || p.b.dtype == APPROXMUL_INT8) &&
                         p.b.col_stride == 1 && mask == 0xff;

    struct Workspace {
        std::vector<uint8_t> x, s;
        std::vector<uint32_t> acc, work, out;
        std::vector<int64_t> wide, wide_rows, col_term;
    };
    std::vector<Workspace> workspaces(static_cast<size_t>(threads));
    parallel_for(jobs, threads, [&](int64_t job, int thread) {
        Workspace &w = workspaces[static_cast<size_t>(thread)];
        const int64_t b0 = job / col_jobs * blocks_per_job, j0 = job % col_jobs * CB;
        const int64_t nb = std::min(blocks_per_job, row_blocks - b0);
        const int64_t nj = std::min(CB, p.cols - j0);
        if (!b_bytes) w.x.resize(static_cast<size_t>(KC * nj));
        w.s.resize(static_cast<size_t>(R * KC));
        w.work.resize(static_cast<size_t>(256 * R * kt.pt_steps));
        w.acc.assign(static_cast<size_t>(nb * R * nj), 0);
        if (wide) w.wide.assign(static_cast<size_t>(nb * R * nj), 0);
        for (int64_t k0 = 0; k0 < p.inner; k0 += KC) {
            const int64_t nk = std::min(KC, p.inner - k0);
            const uint8_t *x;
            int64_t x_stride;
            if (b_bytes) {
                x = static_cast<const uint8_t *>(p.b.data) + k0 * p.b.row_stride + j0;
                x_stride = p.b.row_stride;
            } else {
                pack_codes(p.b, mask, k0, nk, j0, nj, w.x.data(), nj);
                x = w.x.data();
                x_stride = nj;
            }
            for (int64_t bi = 0; bi < nb; ++bi) {
                const int64_t i0 = (b0 + bi) * R, ni = std::min(R, p.rows - i0);
                if (ni < R) std::fill(w.s.begin(), w.s.end(), uint8_t{0});  // padding rows: code 0
                pack_codes(p.a, mask, i0, ni, k0, nk, w.s.data(), KC);
                kt.pt_block(nk, w.s.data(), KC, x, x_stride, nj, wide_planes,
                            w.acc.data() + bi * R * nj, w.work.data());
            }
            if (wide && ((k0 + KC) % FlushSteps == 0 || k0 + KC >= p.inner)) {
                for (size_t e = 0; e < w.acc.size(); ++e) w.wide[e] += w.acc[e];
                std::fill(w.acc.begin(), w.acc.end(), 0u);
            }
        }
        const int64_t total_offset = p.inner * offset;
        // sums are column-major per row block (acc[(bi * nj + j) * R + i]); store_block reads rows
        for (int64_t bi = 0; bi < nb; ++bi) {
            const int64_t i0 = (b0 + bi) * R, ni = std::min(R, p.rows - i0);
            if (wide) {
                const int64_t *from = w.wide.data() + bi * R * nj;
                w.wide_rows.resize(static_cast<size_t>(ni * nj));
                for (int64_t j = 0; j < nj; ++j)
                    for (int64_t i = 0; i < ni; ++i) w.wide_rows[i * nj + j] = from[j * R + i];
                store_block(p.c, cross, total_offset, i0, j0, ni, nj, w.wide_rows.data(), nj,
                            w.col_term);
            } else {
                const uint32_t *from = w.acc.data() + bi * R * nj;
                w.out.resize(static_cast<size_t>(ni * nj));
                for (int64_t j = 0; j < nj; ++j)
                    for (int64_t i = 0; i < ni; ++i) w.out[i * nj + j] = from[j * R + i];
                store_block(p.c, cross, total_offset, i0, j0, ni, nj, w.out.data(), nj, w.col_term);
            }
        }
    });
    return true;
}

bool table_gemm(const KernelTable &kt, const MatmulProblem &p0) {
    const Multiplier &m = *p0.multiplier;
    if (m.plan() != Plan::Table || m.byte_planes(false).empty() || kt.table_block == nullptr)
        return false;
    if (table_pt_gemm(kt, p0)) return true;
    // Stream the dimension that wastes least padding to whole 64-wide
    // chunks (the longer one on a tie): its codes are the kernel's vectors.
    auto use = [](int64_t n) { return static_cast<double>(n) / static_cast<double>(ceil_div(n, 64) * 64); };
    const bool flip = use(p0.rows) > use(p0.cols) ||
                      (use(p0.rows) == use(p0.cols) && p0.rows > p0.cols);
    const MatmulProblem p = flip ? transposed_problem(p0) : p0;
    const uint8_t *planes = m.byte_planes(flip).data();
    const uint16_t *wide_planes = m.wide_planes(flip).data();
    const int64_t offset = m.byte_plane_offset();
    constexpr int64_t KC = 256;            // the kernels' 16-bit sums hold 256 steps
    constexpr int64_t FlushSteps = 65536;  // uint32 sums of values < 2^16 hold 65537 steps
    const bool wide = p.inner > FlushSteps;

    // Streamed width per job: the whole (64-rounded) columns up to the
    // kernel's widest call; rows split until there is parallel work.
    const int64_t W = std::min<int64_t>(kt.table_width, ceil_div(p.cols, 64) * 64);
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
        std::vector<uint32_t> acc;
        std::vector<int64_t> wide;
        std::vector<int64_t> col_term;
    };
    std::vector<Workspace> workspaces(static_cast<size_t>(threads));
    parallel_for(jobs, threads, [&](int64_t job, int thread) {
        Workspace &w = workspaces[static_cast<size_t>(thread)];
        w.x.resize(static_cast<size_t>(KC * W));
        w.s.resize(static_cast<size_t>(rb * KC));
        w.acc.assign(static_cast<size_t>(rb * W), 0);
        if (wide) w.wide.assign(static_cast<size_t>(rb * W), 0);
        const int64_t i0 = job / col_jobs * rb, j0 = job % col_jobs * W;
        const int64_t ni = std::min(rb, p.rows - i0), nj = std::min(W, p.cols - j0);
        const int64_t width = ceil_div(nj, 64) * 64;
        for (int64_t k0 = 0; k0 < p.inner; k0 += KC) {
            const int64_t nk = std::min(KC, p.inner - k0);
            pack_codes(p.b, mask, k0, nk, j0, nj, w.x.data(), W);
            if (width > nj)
                for (int64_t k = 0; k < nk; ++k)
                    std::memset(w.x.data() + k * W + nj, 0, static_cast<size_t>(width - nj));
            pack_codes(p.a, mask, i0, ni, k0, nk, w.s.data(), KC);
            for (int64_t i = 0; i < ni; ++i)
                kt.table_block(nk, w.s.data() + i * KC, w.x.data(), W, width, planes, wide_planes,
                               w.acc.data() + i * W);
            if (wide && ((k0 + KC) % FlushSteps == 0 || k0 + KC >= p.inner)) {
                for (size_t e = 0; e < w.acc.size(); ++e) w.wide[e] += w.acc[e];
                std::fill(w.acc.begin(), w.acc.end(), 0u);
            }
        }
        const int64_t total_offset = p.inner * offset;
        if (wide)
            store_block(p.c, cross, total_offset, i0, j0, ni, nj, w.wide.data(), W, w.col_term);
        else
            store_block(p.c, cross, total_offset, i0, j0, ni, nj, w.acc.data(), W, w.col_term);
    });
    return true;
}


// ------------------------------------------------------------- u8 x s8 GEMM
// Exact and factorized plans on vpdpbusd (4 byte products per int32 lane
// step, twice the rate of the int16 pairs). Every factor pair (u_r, v_r) is
// brought to bytes exactly: powers of two move between the two factors
// (truncation's bit-plane factors 2^j * bit), A's factor must then fit its
// byte type as is, and B's is offset, v = v' + vo_r with v' in B's byte
// type (exact unsigned: b = (b - 128) + 128). The offsets come back as a
// per-row correction: sum_r vo_r * sum_k u_r(A[i,k]).
namespace {

struct ByteFit {
    bool a_signed = false;  // A int8 / B uint8, else A uint8 / B int8
    std::vector<uint8_t> a_lut, b_lut;  // rank x 256, indexed by raw stored byte
    std::vector<int64_t> a_value;       // rank x 256: A's byte as a number (row sums)
    std::vector<int64_t> b_offset;      // vo_r
    int64_t step_bound = 0;             // max over one inner step of |sum_r u_r v'_r|
};

bool fit_bytes(const std::vector<int16_t> &u, const std::vector<int16_t> &v, int rank,
               int64_t side, uint32_t mask, bool a_signed, ByteFit &fit) {
    fit = ByteFit{};
    fit.a_signed = a_signed;
    fit.a_lut.assign(static_cast<size_t>(rank) * 256, 0);
    fit.b_lut.assign(static_cast<size_t>(rank) * 256, 0);
    fit.a_value.assign(static_cast<size_t>(rank) * 256, 0);
    const int64_t a_lo = a_signed ? -128 : 0, a_hi = a_lo + 255;
    const int64_t b_lo = a_signed ? 0 : -128;
    for (int r = 0; r < rank; ++r) {
        const int16_t *ur = u.data() + r * side, *vr = v.data() + r * side;
        bool done = false;
        // shift s > 0 moves 2^s from v to u, s < 0 from u to v; smallest |s|
        // first; odd steps negate both factors (bit-linear terms come out
        // with negative u)
        for (int step = 0; step <= 57 && !done; ++step) {
            const int neg = step % 2 ? -1 : 1, half = step / 2;
            const int s = half % 2 ? (half + 1) / 2 : -(half / 2);
            const int sh = s < 0 ? -s : s;
            int64_t umin = INT64_MAX, umax = INT64_MIN, vmin = INT64_MAX, vmax = INT64_MIN;
            bool divisible = true;
            for (int64_t x = 0; x < side && divisible; ++x) {
                int64_t uu = neg * ur[x], vv = neg * vr[x];
                if (s > 0) {
                    if (vv % (int64_t{1} << sh) != 0) divisible = false;
                    vv /= int64_t{1} << sh;
                    uu *= int64_t{1} << sh;
                } else if (s < 0) {
                    if (uu % (int64_t{1} << sh) != 0) divisible = false;
                    uu /= int64_t{1} << sh;
                    vv *= int64_t{1} << sh;
                }
                umin = std::min(umin, uu), umax = std::max(umax, uu);
                vmin = std::min(vmin, vv), vmax = std::max(vmax, vv);
            }
            if (!divisible || umin < a_lo || umax > a_hi || vmax - vmin > 255) continue;
            const int64_t vo = vmin >= b_lo && vmax <= b_lo + 255 ? 0 : vmin - b_lo;
            for (int byte = 0; byte < 256; ++byte) {
                const uint32_t x = static_cast<uint32_t>(byte) & mask;
                if (x >= static_cast<uint32_t>(side)) continue;
                int64_t uu = neg * ur[x], vv = neg * vr[x];
                if (s > 0) vv /= int64_t{1} << sh, uu *= int64_t{1} << sh;
                if (s < 0) uu /= int64_t{1} << sh, vv *= int64_t{1} << sh;
                fit.a_lut[r * 256 + byte] = static_cast<uint8_t>(uu);
                fit.a_value[r * 256 + byte] = uu;
                fit.b_lut[r * 256 + byte] = static_cast<uint8_t>(vv - vo);
            }
            fit.b_offset.push_back(vo);
            const int64_t umag = std::max(std::abs(umin), std::abs(umax));
            const int64_t vmag = std::max(std::abs(vmin - vo), std::abs(vmax - vo));
            fit.step_bound += umag * vmag;
            done = true;
        }
        if (!done) return false;
    }
    return true;
}

}  // namespace

bool u8_gemm(const KernelTable &kt, const MatmulProblem &p0) {
    const Multiplier &m = *p0.multiplier;
    if (kt.u8_micro == nullptr || m.bits() > 8 || p0.rows == 0 || p0.cols == 0 || p0.inner == 0 ||
        (m.plan() != Plan::ExactGemm && m.plan() != Plan::Factorized))
        return false;
    const int64_t MR = kt.u8_mr, NR = kt.u8_nr;
    const int64_t side = int64_t{1} << m.bits();
    const uint32_t mask = m.operand_mask();
    std::vector<int16_t> u0, v0;  // rank x side, by raw bit pattern
    const int rank = operand_factors(m, u0, v0);
    auto padded = [&](int64_t rows, int64_t cols) {
        return ceil_div(rows, MR) * MR * ceil_div(cols, NR) * NR;
    };
    const bool prefer_flip = padded(p0.cols, p0.rows) * 5 < padded(p0.rows, p0.cols) * 4;
    ByteFit fit;
    bool flip = false, found = false;
    for (int attempt = 0; attempt < 2 && !found; ++attempt) {
        flip = attempt == 0 ? prefer_flip : !prefer_flip;
        const auto &u = flip ? v0 : u0;
        const auto &v = flip ? u0 : v0;
        found = fit_bytes(u, v, rank, side, mask, false, fit) ||
                fit_bytes(u, v, rank, side, mask, true, fit);
    }
    if (!found) return false;
    const MatmulProblem p = flip ? transposed_problem(p0) : p0;
    // k steps per packed block: a multiple of 4 (whole quads for any rank),
    // about 512 transformed bytes, and no more than int32 holds exactly.
    const int64_t flush_inner = fit.step_bound == 0 ? p.inner
                                                    : std::numeric_limits<int32_t>::max() / fit.step_bound;
    int64_t kc = std::min<int64_t>(std::max<int64_t>(4, 512 / rank / 4 * 4), flush_inner / 4 * 4);
    if (kc < 4) return false;
    kc = std::min(kc, ceil_div(p.inner, 4) * 4);
    const int64_t blocks_per_flush = std::max<int64_t>(1, flush_inner / kc);
    const int64_t k_blocks = ceil_div(p.inner, kc);
    const bool wide = k_blocks > blocks_per_flush;
    const int64_t kqb = kc * rank / 4;  // quads per full block
    const int64_t last_nk = p.inner - (k_blocks - 1) * kc;
    const int64_t kq_total = (k_blocks - 1) * kqb + ceil_div(last_nk * rank, 4);

    // Jobs: row blocks of <= 8 panels, columns in blocks of <= 256.
    const int wanted = p.threads > 0 ? p.threads : num_threads();
    const int64_t mpanels = ceil_div(p.rows, MR), npanels = ceil_div(p.cols, NR);
    const bool small = p.rows * p.cols * std::max<int64_t>(p.inner, 1) < (int64_t{1} << 20);
    const int64_t threads = small ? 1 : std::max<int64_t>(1, wanted);
    constexpr int64_t MaxRowPanels = 8, MaxColPanels = 8;
    // Row jobs of <= 8 panels, not rounded to a multiple of the thread count:
    // every row job packs all of B again, and the column jobs give the
    // threads their work (64x576x3136 on 2 threads: 428 -> 480 G/s).
    int64_t row_jobs = ceil_div(mpanels, MaxRowPanels);
    const int64_t mcp = ceil_div(mpanels, row_jobs);
    row_jobs = ceil_div(mpanels, mcp);
    int64_t col_jobs = ceil_div(npanels, MaxColPanels);
    if (row_jobs < threads)  // too few row panels: columns make up the rest
        col_jobs = std::min(npanels, std::max(col_jobs, ceil_div(threads, row_jobs) * col_jobs));
    const int64_t ncp = ceil_div(npanels, col_jobs);
    col_jobs = ceil_div(npanels, ncp);
    const int64_t jobs = row_jobs * col_jobs;
    const int nthreads = static_cast<int>(std::min<int64_t>(threads, jobs));
    const int64_t ldc = ncp * NR;

    // A is packed once for the whole problem (weights: rows x inner bytes)
    // in row blocks of at most a few MiB, with its row corrections.
    const CrossTerms cross(p.a, p.b, p.inner, p.a_zero_point, p.b_zero_point);
    const bool b_bytes = (p.b.dtype == APPROXMUL_UINT8 || p.b.dtype == APPROXMUL_INT8) &&
                         p.b.col_stride == 1;
    // byte rows, contiguous or strided (conv2d's column-major pixel views):
    // a strided row is gathered first, then looked up as a whole
    const bool a_bytes = p.a.dtype == APPROXMUL_UINT8 || p.a.dtype == APPROXMUL_INT8;
    bool any_offset = false;
    for (int64_t vo : fit.b_offset) any_offset = any_offset || vo != 0;
    const int64_t panel_bytes = kq_total * MR * 4;
    const int64_t block_panels = std::max<int64_t>(
        mcp, std::min<int64_t>(mpanels, (int64_t{4} << 20) / std::max<int64_t>(panel_bytes, 1) / mcp * mcp));
    std::vector<uint8_t> apack(static_cast<size_t>(std::min(block_panels, mpanels) * panel_bytes));
    std::vector<int64_t> row_corr(static_cast<size_t>(std::min(block_panels, mpanels) * MR));
    struct Workspace {
        std::vector<uint8_t> b, codes, row, gathered;
        std::vector<int32_t> c;
        std::vector<int64_t> wide, col_term;
    };
    std::vector<Workspace> workspaces(static_cast<size_t>(nthreads));
    for (Workspace &w : workspaces) {
        w.b.assign(static_cast<size_t>(ncp * kqb * NR * 4 + 64), 0);
        w.c.resize(static_cast<size_t>(mcp * MR * ldc));
        if (wide) w.wide.resize(static_cast<size_t>(mcp * MR * ldc));
        if (!b_bytes) w.codes.resize(static_cast<size_t>(kc * ncp * NR));
        w.row.resize(static_cast<size_t>(std::max<int64_t>(p.inner, 4) + 64));
    }

    for (int64_t pb0 = 0; pb0 < mpanels; pb0 += block_panels) {
        const int64_t pbn = std::min(block_panels, mpanels - pb0);
        const int64_t block_row_jobs = ceil_div(pbn, mcp);
        const int64_t block_jobs = block_row_jobs * col_jobs;
        const int block_threads = static_cast<int>(std::min<int64_t>(nthreads, block_jobs));
        // pack A panels (and row corrections); a second parallel region per
        // call only from 64 KiB of packed A (each region waits for every
        // thread, which on a loaded machine can mean a scheduler period); the
        // earlier 4 MiB bound left 256x2304x196 packing on one thread while
        // the other waited (2 threads: 252 -> 340 G/s)
        const int pack_threads = pbn * panel_bytes * rank < (int64_t{64} << 10)
                                     ? 1 : std::min<int>(block_threads, static_cast<int>(pbn));
        parallel_for(pbn, pack_threads, [&](int64_t pi, int thread) {
            Workspace &w = workspaces[static_cast<size_t>(thread)];
            uint8_t *panel = apack.data() + pi * panel_bytes;
            std::memset(panel, 0, static_cast<size_t>(panel_bytes));
            for (int64_t r = 0; r < MR; ++r) {
                const int64_t i = (pb0 + pi) * MR + r;
                int64_t corr = 0;
                if (i >= p.rows) {
                    row_corr[static_cast<size_t>(pi * MR + r)] = 0;
                    continue;
                }
                if (rank == 1 && a_bytes) {
                    const auto *src = static_cast<const uint8_t *>(p.a.data) + i * p.a.row_stride;
                    if (p.a.col_stride != 1) {
                        w.gathered.resize(static_cast<size_t>(p.inner));
                        for (int64_t k = 0; k < p.inner; ++k)
                            w.gathered[static_cast<size_t>(k)] = src[k * p.a.col_stride];
                        src = w.gathered.data();
                    }
                    kt.u8_lut(p.inner, src, fit.a_lut.data(), w.row.data());
                    const int64_t kq_n = ceil_div(p.inner, 4);
                    std::memset(w.row.data() + p.inner, 0, 4);
                    for (int64_t kq = 0; kq < kq_n; ++kq)
                        std::memcpy(panel + (kq * MR + r) * 4, w.row.data() + kq * 4, 4);
                    if (fit.b_offset[0] != 0) {
                        int64_t sum = 0;
                        if (fit.a_signed)
                            for (int64_t k = 0; k < p.inner; ++k)
                                sum += static_cast<int8_t>(w.row[static_cast<size_t>(k)]);
                        else
                            for (int64_t k = 0; k < p.inner; ++k) sum += w.row[static_cast<size_t>(k)];
                        corr = fit.b_offset[0] * sum;
                    }
                } else {
                    with_codes(p.a, mask, [&](auto code) {
                        for (int64_t k = 0; k < p.inner; ++k) {
                            const uint32_t x = code(i, k) & 0xff;
                            const int64_t kb = k / kc, t = (k - kb * kc) * rank;
                            for (int q = 0; q < rank; ++q) {
                                const int64_t tt = kb * kqb * 4 + t + q;
                                panel[((tt >> 2) * MR + r) * 4 + (tt & 3)] = fit.a_lut[q * 256 + x];
                                corr += fit.b_offset[q] * fit.a_value[q * 256 + x];
                            }
                        }
                    });
                }
                row_corr[static_cast<size_t>(pi * MR + r)] = any_offset ? corr : 0;
            }
        });
        parallel_for(block_jobs, block_threads, [&](int64_t job, int thread) {
            Workspace &w = workspaces[static_cast<size_t>(thread)];
            const int64_t rj = job / col_jobs, cj = job % col_jobs;
            const int64_t pi0 = rj * mcp, ip_count = std::min(mcp, pbn - pi0);
            const int64_t i0 = (pb0 + pi0) * MR, j0 = cj * ncp * NR;
            const int64_t ni = std::min(ip_count * MR, p.rows - i0), nj = std::min(ncp * NR, p.cols - j0);
            const int64_t jp_count = ceil_div(nj, NR);
            for (int64_t kb = 0; kb < k_blocks; ++kb) {
                const int64_t k0 = kb * kc, nk = std::min(kc, p.inner - k0);
                const int64_t kquads = ceil_div(nk * rank, 4);
                const uint8_t *rows_base;
                int64_t rows_stride;
                if (b_bytes) {
                    rows_base = static_cast<const uint8_t *>(p.b.data) + k0 * p.b.row_stride + j0;
                    rows_stride = p.b.row_stride;
                } else {
                    with_codes(p.b, mask, [&](auto code) {
                        for (int64_t k = 0; k < nk; ++k)
                            for (int64_t j = 0; j < nj; ++j)
                                w.codes[static_cast<size_t>(k * nj + j)] =
                                    static_cast<uint8_t>(code(k0 + k, j0 + j));
                    });
                    rows_base = w.codes.data();
                    rows_stride = nj;
                }
                const int64_t panel_stride = kquads * NR * 4;
                for (int64_t kq = 0; kq < kquads; ++kq) {
                    const uint8_t *rows[4];
                    const uint8_t *luts[4];
                    for (int h = 0; h < 4; ++h) {
                        int64_t t = kq * 4 + h;
                        // padding steps (A is 0 there) reuse the last real row
                        if (t >= nk * rank) t = nk * rank - 1;
                        rows[h] = rows_base + (t / rank) * rows_stride;
                        luts[h] = fit.b_lut.data() + (t % rank) * 256;
                    }
                    kt.u8_pack(nj, rows, luts, w.b.data() + kq * NR * 4, panel_stride);
                }
                const bool accumulate = kb % blocks_per_flush != 0;
                for (int64_t jp = 0; jp < jp_count; ++jp)
                    for (int64_t ip = 0; ip < ip_count; ++ip)
                        kt.u8_micro(kquads,
                                    apack.data() + (pi0 + ip) * panel_bytes + kb * kqb * MR * 4,
                                    w.b.data() + jp * panel_stride,
                                    w.c.data() + ip * MR * ldc + jp * NR, ldc, accumulate,
                                    fit.a_signed);
                if (wide && (kb % blocks_per_flush == blocks_per_flush - 1 || kb == k_blocks - 1)) {
                    const bool first = kb < blocks_per_flush;
                    for (int64_t i = 0; i < ni; ++i)
                        for (int64_t j = 0; j < nj; ++j)
                            w.wide[i * ldc + j] = (first ? 0 : w.wide[i * ldc + j]) + w.c[i * ldc + j];
                }
            }
            const int64_t *rc = row_corr.data() + pi0 * MR;
            if (wide)
                store_block(p.c, cross, 0, i0, j0, ni, nj, w.wide.data(), ldc, w.col_term, rc);
            else
                store_block(p.c, cross, 0, i0, j0, ni, nj, w.c.data(), ldc, w.col_term, rc);
        });
    }
    return true;
}

}  // namespace approxmul::kernels
