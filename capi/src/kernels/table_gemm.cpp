// table_gemm: arbitrary tables (the table plan) through the instruction
// set's table kernels: models of up to 4 bits on the nibble kernel, wider
// ones in two orders: weight-stationary (table_block: per
// stationary code, up to 256 streamed codes looked up in its product
// column; the operand that keeps the longest rows streams, transposing the
// problem and the table when the rows are the better stream) and
// product-table order (pt_block, where the kernel set has one and the
// streamed length pays for its precompute).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../core/scratch.hpp"
#include "common.hpp"
#include "drivers.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

namespace {

// n uint32 of v starting on a cache line: the product-table kernel reads
// and writes 32-byte rows, half of which straddle two lines in a buffer
// malloc aligns to 16 bytes (a 256x2304x196 table GEMM ran a fifth slower).
uint32_t *cache_line_aligned(std::vector<uint32_t> &v, size_t n) {
    constexpr size_t kLine = 64;
    v.resize(n + kLine / sizeof(uint32_t));
    const auto address = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + (kLine - address % kLine) % kLine / sizeof(uint32_t);
}

// Adds uint32 sums into their int64 totals and clears them (the drivers'
// flush, at least every 2^32 / (largest value) inner steps).
void flush_sums(std::vector<uint32_t> &acc, std::vector<int64_t> &wide) {
    for (size_t e = 0; e < acc.size(); ++e) wide[e] += acc[e];
    std::fill(acc.begin(), acc.end(), 0u);
}

// store_block of a job's sums, rows ld apart: the int64 totals when the inner
// size needed them (wide), else the uint32 sums.
void store_sums(const MatmulProblem &p, const CrossTerms &cross, int64_t base, int64_t i0,
                int64_t j0, int64_t ni, int64_t nj, bool wide, const std::vector<uint32_t> &acc,
                const std::vector<int64_t> &totals, int64_t ld, std::vector<int64_t> &col_term) {
    if (wide)
        store_block(p.c, cross, base, i0, j0, ni, nj, totals.data(), ld, col_term);
    else
        store_block(p.c, cross, base, i0, j0, ni, nj, acc.data(), ld, col_term);
}

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
    const int wanted = wanted_threads(p);
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
    const CrossTerms cross(p);
    const bool b_bytes = (p.b.dtype == APPROXMUL_UINT8 || p.b.dtype == APPROXMUL_INT8) &&
                         p.b.col_stride == 1 && mask == 0xff;

    struct Workspace {
        std::vector<uint8_t> x, s;
        std::vector<uint32_t> acc, work, out;
        std::vector<int64_t> wide, wide_rows, col_term;
    };
    parallel_for_each<Workspace>(jobs, threads, [&](int64_t job, Workspace &w) {
        const int64_t b0 = job / col_jobs * blocks_per_job, j0 = job % col_jobs * CB;
        const int64_t nb = std::min(blocks_per_job, row_blocks - b0);
        const int64_t nj = std::min(CB, p.cols - j0);
        if (!b_bytes) w.x.resize(static_cast<size_t>(KC * nj));
        w.s.resize(static_cast<size_t>(R * KC));
        uint32_t *work = cache_line_aligned(w.work, static_cast<size_t>(256 * R * kt.pt_steps));
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
                            w.acc.data() + bi * R * nj, work);
            }
            if (wide && ((k0 + KC) % FlushSteps == 0 || k0 + KC >= p.inner)) flush_sums(w.acc, w.wide);
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

// Models of up to 4 bits whose products span at most a byte, through the
// set's nibble kernel (kt.nibble_block): weight-stationary like table_block,
// the longer dimension streaming in panels of nibble_cols codes, k-major.
// The low-nibble error GEMMs of 5..8-bit exact-plus-table models run here.
bool nibble_gemm(const KernelTable &kt, const MatmulProblem &p0) {
    const Multiplier &m = *p0.multiplier;
    if (kt.nibble_block == nullptr || m.plan() != Plan::Table || m.bits() > 4 ||
        m.max_product() - m.min_product() > 255 || p0.rows == 0 || p0.cols == 0)
        return false;
    const bool flip = p0.rows > p0.cols;  // stream the longer dimension
    const MatmulProblem p = flip ? transposed_problem(p0) : p0;
    const int bits = m.bits();
    const int64_t offset = m.min_product();
    // M - offset by (stationary, streamed) raw pattern
    uint8_t table[256] = {};
    int64_t largest = 0;
    for (uint32_t s = 0; s < (1u << bits); ++s)
        for (uint32_t x = 0; x < (1u << bits); ++x) {
            const int64_t v = m.table()[flip ? x << bits | s : s << bits | x] - offset;
            table[s * 16 + x] = static_cast<uint8_t>(v);
            largest = std::max(largest, v);
        }
    const int group = largest == 0 ? 256 : static_cast<int>(255 / largest);
    // masked: exact_plus_table hands over its operands' whole bytes
    const uint32_t mask = m.operand_mask();
    const int64_t R = kt.nibble_rows, W = kt.nibble_cols;
    constexpr int64_t KC = 256;                   // the kernel's 16-bit sums hold 256 steps
    constexpr int64_t FlushSteps = int64_t{1} << 24;  // uint32 sums of values <= 255
    const bool wide = p.inner > FlushSteps;
    const int wanted = wanted_threads(p);
    const int64_t CB = std::min<int64_t>(4 * W, ceil_div(p.cols, W) * W);
    const int64_t col_jobs = ceil_div(p.cols, CB);
    const int64_t target = 4 * static_cast<int64_t>(wanted);
    const int64_t row_split = col_jobs >= target ? 1 : ceil_div(target, col_jobs);
    const int64_t rb = std::clamp<int64_t>(ceil_div(ceil_div(p.rows, row_split), R) * R, R, 256);
    const int64_t row_jobs = ceil_div(p.rows, rb);
    const int64_t jobs = row_jobs * col_jobs;
    const int threads = threads_for(p, jobs);
    const CrossTerms cross(p);

    // The streamed panels of column job cj over inner block kb (padding
    // columns: code 0), into x.
    const int64_t k_blocks = ceil_div(p.inner, KC), x_block = ceil_div(CB, W) * KC * W;
    auto pack_x = [&](int64_t cj, int64_t kb, uint8_t *x) {
        const int64_t j0 = cj * CB, nj = std::min(CB, p.cols - j0);
        const int64_t k0 = kb * KC, nk = std::min(KC, p.inner - k0);
        std::memset(x, 0, static_cast<size_t>(ceil_div(nj, W) * KC * W));
        for (int64_t q = 0; q * W < nj; ++q)
            pack_codes(p.b, mask, k0, nk, j0 + q * W, std::min(W, nj - q * W), x + q * KC * W, W);
    };
    // (a batch-1 conv2d's 8 row jobs each packed its 512 weight columns'
    // low bits: 29 % of the layer)
    const Scratch<uint8_t> shared_x =
        pack_shared<ThreadNumber>(row_jobs, col_jobs, k_blocks, x_block, threads,
                                  [&](int64_t block, ThreadNumber &, uint8_t *x) {
            pack_x(block / k_blocks, block % k_blocks, x);
        });
    const bool share_x = shared_x.size() != 0;

    struct Workspace {
        std::vector<uint8_t> x, s;
        std::vector<uint32_t> acc;
        std::vector<int64_t> wide, col_term;
    };
    parallel_for_each<Workspace>(jobs, threads, [&](int64_t job, Workspace &w) {
        const int64_t cj = job % col_jobs, i0 = job / col_jobs * rb, j0 = cj * CB;
        const int64_t ni = std::min(rb, p.rows - i0), nj = std::min(CB, p.cols - j0);
        const int64_t panels = ceil_div(nj, W), row_groups = ceil_div(ni, R);
        if (!share_x) w.x.resize(static_cast<size_t>(x_block));
        w.s.assign(static_cast<size_t>(row_groups * R * KC), 0);  // padding rows: code 0
        w.acc.assign(static_cast<size_t>(row_groups * R * CB), 0);
        if (wide) w.wide.assign(w.acc.size(), 0);
        for (int64_t kb = 0, k0 = 0; k0 < p.inner; ++kb, k0 += KC) {
            const int64_t nk = std::min(KC, p.inner - k0);
            const uint8_t *x = share_x ? shared_x.data() + (cj * k_blocks + kb) * x_block : w.x.data();
            if (!share_x) pack_x(cj, kb, w.x.data());
            pack_codes(p.a, mask, i0, ni, k0, nk, w.s.data(), KC);
            for (int64_t g = 0; g < row_groups; ++g)
                for (int64_t q = 0; q < panels; ++q)
                    kt.nibble_block(nk, w.s.data() + g * R * KC, KC, x + q * KC * W, table,
                                    group, w.acc.data() + g * R * CB + q * W, CB);
            if (wide && ((k0 + KC) % FlushSteps == 0 || k0 + KC >= p.inner)) flush_sums(w.acc, w.wide);
        }
        store_sums(p, cross, p.inner * offset, i0, j0, ni, nj, wide, w.acc, w.wide, CB, w.col_term);
    });
    return true;
}

}  // namespace

bool table_gemm(const KernelTable &kt, const MatmulProblem &p0) {
    if (nibble_gemm(kt, p0)) return true;
    const Multiplier &m = *p0.multiplier;
    if (m.plan() != Plan::Table || m.byte_planes(false).empty() || kt.table_block == nullptr)
        return false;
    if (table_pt_gemm(kt, p0)) return true;
    // Stream the longer dimension (its codes are the kernel's vectors, and
    // wider calls spread each stationary code's setup: a 64->64 8x8 conv2d
    // on one thread, 400-pixel blocks streamed over their 64 channels, took
    // 16.2 ms against 10.5 ms flipped),
    // unless padding it to whole 64-wide chunks costs a quarter more
    // products than the other orientation.
    const int64_t as_is = p0.rows * (ceil_div(p0.cols, 64) * 64);
    const int64_t flipped = p0.cols * (ceil_div(p0.rows, 64) * 64);
    const bool flip = p0.rows > p0.cols ? flipped * 4 <= as_is * 5 : as_is * 4 > flipped * 5;
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
    const int wanted = wanted_threads(p);
    const int64_t target = 4 * static_cast<int64_t>(wanted);
    const int64_t col_jobs = ceil_div(p.cols, W);
    // Column job cj's first column and count: the 64-column chunks shared
    // out evenly, the larger jobs first (3136 columns: ten jobs of 4 chunks,
    // then three of 3, not twelve of 4 and a last one of 1, whose call loads
    // the stationary code's 8 registers for one chunk). The threads take
    // consecutive jobs, so with one row job the smaller ones end the last
    // thread's stretch.
    const int64_t chunks = ceil_div(p.cols, 64), base = chunks / col_jobs,
                  larger = chunks % col_jobs;
    auto col_range = [&](int64_t cj) {
        const int64_t first = (cj * base + std::min(cj, larger)) * 64;
        const int64_t end = first + (base + (cj < larger)) * 64;
        return std::pair<int64_t, int64_t>{first, std::min(end, p.cols) - first};
    };
    const int64_t row_split = col_jobs >= target ? 1 : ceil_div(target, col_jobs);
    const int64_t rb = std::clamp<int64_t>(ceil_div(p.rows, row_split), 1, 256);
    const int64_t row_jobs = ceil_div(p.rows, rb);
    const int64_t jobs = row_jobs * col_jobs;
    const int threads = threads_for(p, jobs);
    const CrossTerms cross(p);
    const uint32_t mask = m.operand_mask();

    // The streamed codes of column job cj over inner block kb into x, W
    // apart, zero codes up to the 64-column chunks.
    const int64_t k_blocks = ceil_div(p.inner, KC);
    auto pack_x = [&](int64_t cj, int64_t kb, uint8_t *x) {
        const auto [j0, nj] = col_range(cj);
        const int64_t width = ceil_div(nj, 64) * 64;
        const int64_t k0 = kb * KC, nk = std::min(KC, p.inner - k0);
        pack_codes(p.b, mask, k0, nk, j0, nj, x, W);
        if (width > nj)
            for (int64_t k = 0; k < nk; ++k) std::memset(x + k * W + nj, 0, static_cast<size_t>(width - nj));
    };
    const Scratch<uint8_t> shared_x =
        pack_shared<ThreadNumber>(row_jobs, col_jobs, k_blocks, KC * W, threads,
                                  [&](int64_t block, ThreadNumber &, uint8_t *x) {
            pack_x(block / k_blocks, block % k_blocks, x);
        });
    const bool share_x = shared_x.size() != 0;

    struct Workspace {
        std::vector<uint8_t> x, s;
        std::vector<uint32_t> acc;
        std::vector<int64_t> wide;
        std::vector<int64_t> col_term;
    };
    parallel_for_each<Workspace>(jobs, threads, [&](int64_t job, Workspace &w) {
        if (!share_x) w.x.resize(static_cast<size_t>(KC * W));
        w.s.resize(static_cast<size_t>(rb * KC));
        w.acc.assign(static_cast<size_t>(rb * W), 0);
        if (wide) w.wide.assign(static_cast<size_t>(rb * W), 0);
        const int64_t cj = job % col_jobs, i0 = job / col_jobs * rb;
        const auto [j0, nj] = col_range(cj);
        const int64_t ni = std::min(rb, p.rows - i0);
        const int64_t width = ceil_div(nj, 64) * 64;
        for (int64_t kb = 0, k0 = 0; k0 < p.inner; ++kb, k0 += KC) {
            const int64_t nk = std::min(KC, p.inner - k0);
            const uint8_t *x = share_x ? shared_x.data() + (cj * k_blocks + kb) * KC * W : w.x.data();
            if (!share_x) pack_x(cj, kb, w.x.data());
            pack_codes(p.a, mask, i0, ni, k0, nk, w.s.data(), KC);
            for (int64_t i = 0; i < ni; ++i)
                kt.table_block(nk, w.s.data() + i * KC, x, W, width, planes, wide_planes,
                               w.acc.data() + i * W);
            if (wide && ((k0 + KC) % FlushSteps == 0 || k0 + KC >= p.inner)) flush_sums(w.acc, w.wide);
        }
        store_sums(p, cross, p.inner * offset, i0, j0, ni, nj, wide, w.acc, w.wide, W, w.col_term);
    });
    return true;
}

}  // namespace approxmul::kernels
