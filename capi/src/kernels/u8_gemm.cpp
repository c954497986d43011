// u8_gemm: exact and factorized plans on vpdpbusd (4 byte products per int32
// lane step, twice the rate of int16_gemm's pairs). Every factor pair
// (u_r, v_r) is brought to bytes exactly: powers of two move between the two
// factors (truncation's bit-plane factors 2^j * bit), A's factor must then
// fit its byte type as is, and B's is offset, v = v' + vo_r with v' in B's
// byte type (exact unsigned: b = (b - 128) + 128). The offsets come back as
// a per-row correction: sum_r vo_r * sum_k u_r(A[i,k]).
//
// Steps: fit the factors to bytes (choosing the orientation), block the
// inner dimension so int32 sums stay exact, split the outputs into jobs;
// then per block of A's rows: pack A's panels (and row corrections) once,
// and per job pack B's quads for each inner block, run the micro-kernel
// over the tile grid, widen, store.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../core/scratch.hpp"
#include "common.hpp"
#include "drivers.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

namespace {

bool fit_bytes(const std::vector<int16_t> &u, const std::vector<int16_t> &v, int rank,
               int64_t side, uint32_t mask, bool a_signed, U8Factors &fit) {
    fit = U8Factors{};
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
    fit.found = true;
    if (rank > 1 && rank <= 8) {
        fit.a_steps.assign(256, {});
        fit.a_corr.assign(256, 0);
        for (size_t x = 0; x < 256; ++x)
            for (size_t q = 0; q < static_cast<size_t>(rank); ++q) {
                fit.a_steps[x][q] = fit.a_lut[q * 256 + x];
                fit.a_corr[x] += fit.b_offset[q] * fit.a_value[q * 256 + x];
            }
    }
    if (rank == 1) {
        const int flip = fit.b_lut[0];
        bool affine = true;
        for (int x = 0; x < 256 && affine; ++x) affine = fit.b_lut[static_cast<size_t>(x)] == (x ^ flip);
        fit.b_flip = affine ? flip : -1;
    }
    return true;
}


// One call's plan: the oriented problem and its byte factors, the inner
// blocking, the job grid and the packing of A.
struct U8Plan {
    MatmulProblem p;
    int64_t MR, NR;
    int64_t tile_quads;  // the kernel set's, 0 unless it multiplies tiles (isa.hpp)
    uint32_t mask;
    int rank;
    const U8Factors *fit;  // the multiplier's, for the orientation taken
    bool any_offset;  // some vo_r != 0: rows need corrections

    // inner blocking: kc steps (kqb quads) per block; int32 sums hold
    // blocks_per_flush blocks, after which (wide) they go to int64
    int64_t kc, kqb, kq_total, blocks_per_flush, k_blocks;
    bool wide;

    // jobs: row blocks of mcp panels x column blocks of ncp panels
    int64_t mpanels, mcp, ncp, col_jobs, ldc;
    int threads;

    // A is packed in blocks of block_panels panels of panel_bytes each
    int64_t panel_bytes, block_panels;
    // bytes past B's packed blocks that the micro-kernel may read
    int64_t b_slack;
    // B's quads per column job and inner block: b_block_bytes each
    int64_t row_jobs, b_block_bytes;
    // B's blocks packed by each thread for itself (own_pack_fits), instead
    // of once for all threads (pack_shared)
    bool own_pack = false;
    bool a_bytes;  // byte rows, contiguous or strided (conv2d's column-major pixel views)
    bool a_as_is = false;  // rank 1 with the identity as A's map (exact codes): copied, not looked up
    bool b_bytes;  // contiguous byte rows: B's quads read the operand directly
    const int64_t *b_row_offsets = nullptr;  // B's row k at b.data + b_row_offsets[k]
};

// The byte factors, in the orientation with less tile padding when both fit.
bool fit_problem(const KernelTable &kt, const MatmulProblem &p0, U8Plan &plan) {
    const Multiplier &m = *p0.multiplier;
    plan.MR = kt.u8_mr;
    plan.NR = kt.u8_nr;
    plan.tile_quads = kt.u8_tile_quads;
    plan.mask = m.operand_mask();
    plan.rank = m.int16_factors().rank;
    auto padded = [&](int64_t rows, int64_t cols) {
        return ceil_div(rows, plan.MR) * plan.MR * ceil_div(cols, plan.NR) * plan.NR;
    };
    // Flip a column-major A (conv2d's pixels x taps view) unless that pads
    // twice the tiles: its transpose is B with contiguous byte rows, which
    // the kernel set packs by vector lookups, where A's panels would gather
    // one strided byte at a time (a third of a 32->32 16x16 conv; with the
    // flip lost to 12 % more padding, a 64->64 8x8 conv on one thread ran
    // 6x slower than on two).
    const int64_t as_is = padded(p0.rows, p0.cols), flipped = padded(p0.cols, p0.rows);
    const bool a_column_major = p0.a.col_stride != 1 && p0.a.row_stride == 1;
    const bool prefer_flip = flipped * 5 < as_is * 4 || (a_column_major && flipped <= 2 * as_is);
    // columns read in place become B's rows, which pack_b_block reads by pointer
    const bool in_place = p0.a_col_offsets != nullptr;
    bool flip = false, found = false;
    for (int attempt = 0; attempt < (in_place ? 1 : 2) && !found; ++attempt) {
        flip = in_place || (attempt == 0 ? prefer_flip : !prefer_flip);
        plan.fit = &m.u8_factors(flip);
        found = plan.fit->found;
    }
    if (!found) return false;
    plan.p = flip ? transposed_problem(p0) : p0;
    plan.a_as_is = plan.rank == 1;
    for (int x = 0; x < 256 && plan.a_as_is; ++x) plan.a_as_is = plan.fit->a_lut[static_cast<size_t>(x)] == x;
    plan.p.a_col_offsets = nullptr;
    plan.b_row_offsets = p0.a_col_offsets;
    plan.any_offset = false;
    for (int64_t vo : plan.fit->b_offset) plan.any_offset = plan.any_offset || vo != 0;
    return true;
}

// k steps per packed block: a multiple of 4 (whole quads for any rank;
// for a tile kernel, whole steps of its quads), about 512 transformed
// bytes, and no more than int32 holds exactly.
bool block_inner(U8Plan &plan) {
    const int64_t inner = plan.p.inner;
    const int64_t flush_inner = plan.fit->step_bound == 0
                                    ? inner
                                    : std::numeric_limits<int32_t>::max() / plan.fit->step_bound;
    const int64_t step_bytes = plan.tile_quads > 0 ? 4 * plan.tile_quads : 4;
    const int64_t q = plan.tile_quads > 0 ? step_bytes / std::gcd(step_bytes, int64_t{plan.rank}) : 4;
    int64_t kc = std::min<int64_t>(std::max<int64_t>(q, 512 / plan.rank / q * q), flush_inner / q * q);
    if (kc < q) return false;
    kc = std::min(kc, ceil_div(inner, q) * q);
    plan.kc = kc;
    plan.blocks_per_flush = std::max<int64_t>(1, flush_inner / kc);
    plan.k_blocks = ceil_div(inner, kc);
    plan.wide = plan.k_blocks > plan.blocks_per_flush;
    plan.kqb = kc * plan.rank / 4;  // quads per full block
    const int64_t last_nk = inner - (plan.k_blocks - 1) * kc;
    plan.kq_total = (plan.k_blocks - 1) * plan.kqb + ceil_div(last_nk * plan.rank, 4);
    return true;
}

// Row jobs of <= 8 panels, not rounded to a multiple of the thread count:
// every row job packs all of B again, and the column jobs give the threads
// their work (64x576x3136 on 2 threads: 428 -> 480 G/s). A is packed once
// for the whole problem in row blocks of at most a few MiB.
void split_jobs(U8Plan &plan) {
    const MatmulProblem &p = plan.p;
    const int64_t MR = plan.MR, NR = plan.NR;
    plan.mpanels = ceil_div(p.rows, MR);
    const int64_t npanels = ceil_div(p.cols, NR);
    const bool small = p.rows * p.cols * std::max<int64_t>(p.inner, 1) < (int64_t{1} << 20);
    const int64_t threads = small ? 1 : std::max<int64_t>(1, wanted_threads(p));
    constexpr int64_t MaxRowPanels = 8, MaxColPanels = 8;
    int64_t row_jobs = ceil_div(plan.mpanels, MaxRowPanels);
    plan.mcp = ceil_div(plan.mpanels, row_jobs);
    row_jobs = ceil_div(plan.mpanels, plan.mcp);
    int64_t col_jobs = ceil_div(npanels, MaxColPanels);
    if (row_jobs < threads)  // too few row panels: columns make up the rest
        col_jobs = std::min(npanels, std::max(col_jobs, ceil_div(threads, row_jobs) * col_jobs));
    plan.ncp = ceil_div(npanels, col_jobs);
    plan.col_jobs = ceil_div(npanels, plan.ncp);
    plan.threads = static_cast<int>(std::min<int64_t>(threads, row_jobs * plan.col_jobs));
    plan.ldc = plan.ncp * NR;
    plan.row_jobs = row_jobs;
    plan.b_slack = 64 + plan.tile_quads * NR * 4;
    plan.b_block_bytes = plan.ncp * plan.kqb * NR * 4 + plan.b_slack;

    plan.b_bytes = (p.b.dtype == APPROXMUL_UINT8 || p.b.dtype == APPROXMUL_INT8) &&
                   p.b.col_stride == 1;
    plan.a_bytes = p.a.dtype == APPROXMUL_UINT8 || p.a.dtype == APPROXMUL_INT8;
    // a tile kernel's panels hold each inner block's rows padded to whole steps
    plan.panel_bytes = (plan.tile_quads > 0 ? plan.k_blocks * plan.kqb : plan.kq_total) * MR * 4;
    plan.block_panels = std::max<int64_t>(
        plan.mcp, std::min<int64_t>(plan.mpanels, (int64_t{4} << 20) /
                                                      std::max<int64_t>(plan.panel_bytes, 1) /
                                                      plan.mcp * plan.mcp));
}

// The alternative to pack_shared while B's blocks stay within a core's
// L2: each thread packs the blocks its own jobs read, once per call
// (one parallel region of jobs). Blocks that one thread packs and the other
// reads move between the cores' caches on every call, and each new packing
// has to take the lines back: a 2-thread 256x2304x196 byte GEMM spent a
// quarter of its time packing B, against 3 % on one thread.
constexpr int64_t kOwnPackBytes = int64_t{1} << 20;
inline bool own_pack_fits(int threads, int64_t row_jobs, int64_t blocks, int64_t block_bytes) {
    return threads > 1 && row_jobs >= 2 && blocks * block_bytes <= kOwnPackBytes;
}

// One thread's packed copies of B's blocks (a member of its Workspace).
class OwnBlocks {
public:
    // Block `block` of `blocks`, packed by pack(dst) the first time this
    // thread asks for it.
    template <typename Pack>
    const uint8_t *get(int64_t block, int64_t blocks, int64_t block_bytes, const Pack &pack) {
        if (packed_.empty()) {
            data_.reserve(static_cast<size_t>(blocks * block_bytes));
            packed_.assign(static_cast<size_t>(blocks), 0);
        }
        uint8_t *dst = data_.data() + block * block_bytes;
        if (!packed_[static_cast<size_t>(block)]) {
            pack(dst);
            packed_[static_cast<size_t>(block)] = 1;
        }
        return dst;
    }

private:
    Scratch<uint8_t> data_;
    std::vector<char> packed_;
};

// One thread's buffers (parallel_for_each makes one per thread, on it).
struct Workspace {
    Scratch<uint8_t> b, codes;
    OwnBlocks own_b;  // B's blocks, where each thread packs its own (plan.own_pack)
    Scratch<int32_t> c;
    Scratch<int64_t> wide;
    std::vector<uint8_t> row, gathered;
    std::vector<int64_t> col_term;
};

// A tile kernel's configuration loaded on this thread for one job, the
// tiles released after it (other code on the thread may use them too).
struct TileSession {
    explicit TileSession(const KernelTable &kt) : kt_(kt) {
        if (kt_.u8_tiles != nullptr) kt_.u8_tiles(1);
    }
    ~TileSession() {
        if (kt_.u8_tiles != nullptr) kt_.u8_tiles(0);
    }
    TileSession(const TileSession &) = delete;
    TileSession &operator=(const TileSession &) = delete;

private:
    const KernelTable &kt_;
};

// B's codes of one block, when they are not bytes read in place.
uint8_t *block_codes(const U8Plan &plan, Workspace &w) {
    return w.codes.reserve(static_cast<size_t>(plan.kc * plan.ncp * plan.NR));
}

// panel[(kq * MR + r) * 4 + t] = rows[r * stride + kq * 4 + t] for kq <
// kq_n: MR rows' quads interleaved, by 4 x 4 transposes of 32-bit quads
// where SSE2 has them (a 4-byte copy per quad and row was half the time a
// batch-1 conv2d spent packing its weights).
void interleave_quads(const uint8_t *rows, int64_t stride, int64_t MR, int64_t kq_n,
                      uint8_t *panel) {
    int64_t kq = 0;
#if defined(__SSE2__)
    if (MR % 4 == 0)
        for (; kq + 4 <= kq_n; kq += 4)
            for (int64_t r = 0; r < MR; r += 4) {
                __m128i x[4];
                for (int t = 0; t < 4; ++t)
                    x[t] = _mm_loadu_si128(
                        reinterpret_cast<const __m128i *>(rows + (r + t) * stride + kq * 4));
                // x[t] holds row r + t's quads kq .. kq + 3
                const __m128i a = _mm_unpacklo_epi32(x[0], x[1]), b = _mm_unpacklo_epi32(x[2], x[3]);
                const __m128i c = _mm_unpackhi_epi32(x[0], x[1]), d = _mm_unpackhi_epi32(x[2], x[3]);
                const __m128i q[4] = {_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b),
                                      _mm_unpacklo_epi64(c, d), _mm_unpackhi_epi64(c, d)};
                for (int t = 0; t < 4; ++t)
                    _mm_storeu_si128(reinterpret_cast<__m128i *>(panel + ((kq + t) * MR + r) * 4), q[t]);
            }
#endif
    for (; kq < kq_n; ++kq)
        for (int64_t r = 0; r < MR; ++r)
            std::memcpy(panel + (kq * MR + r) * 4, rows + r * stride + kq * 4, 4);
}

// A panel's rows (row r's quad kq at rows[r * stride + kq * 4]) in a tile
// kernel's layout (isa.hpp): per inner block, rows of its quads rounded up
// to whole steps, zeros past them.
// For each inner block of a tile kernel's panel: f(kq0, its first quad;
// kqn, its quads; row, the bytes of each of its rows, whole steps).
template <typename F>
void for_each_tile_block(const U8Plan &plan, F &&f) {
    for (int64_t kb = 0; kb < plan.k_blocks; ++kb) {
        const int64_t kq0 = kb * plan.kqb, kqn = std::min(plan.kqb, plan.kq_total - kq0);
        f(kq0, kqn, ceil_div(kqn, plan.tile_quads) * plan.tile_quads * 4);
    }
}

void write_tile_rows(const U8Plan &plan, const uint8_t *rows, int64_t stride, uint8_t *panel) {
    const int64_t MR = plan.MR;
    for_each_tile_block(plan, [&](int64_t kq0, int64_t kqn, int64_t row) {
        uint8_t *block = panel + kq0 * MR * 4;
        for (int64_t r = 0; r < MR; ++r) {
            uint8_t *dst = block + r * row;
            std::memcpy(dst, rows + r * stride + kq0 * 4, static_cast<size_t>(kqn * 4));
            std::memset(dst + kqn * 4, 0, static_cast<size_t>(row - kqn * 4));
        }
    });
}

// Row i of A's byte codes, contiguous (a strided row gathered into
// w.gathered), or nullptr past A's rows.
const uint8_t *a_byte_row(const MatmulProblem &p, int64_t i, Workspace &w) {
    if (i >= p.rows) return nullptr;
    const auto *src = static_cast<const uint8_t *>(p.a.data) + i * p.a.row_stride;
    if (p.a.col_stride == 1) return src;
    w.gathered.resize(static_cast<size_t>(p.inner));
    for (int64_t k = 0; k < p.inner; ++k) w.gathered[static_cast<size_t>(k)] = src[k * p.a.col_stride];
    return w.gathered.data();
}

// A panel from the quads layout (a[(kq * MR + r) * 4 + h]) to a tile
// kernel's, through rows.
void to_tile_rows(const U8Plan &plan, uint8_t *panel, Workspace &w) {
    const int64_t MR = plan.MR, stride = plan.kq_total * 4;
    w.gathered.resize(static_cast<size_t>(MR * stride));
    for (int64_t kq = 0; kq < plan.kq_total; ++kq)
        for (int64_t r = 0; r < MR; ++r)
            std::memcpy(w.gathered.data() + r * stride + kq * 4, panel + (kq * MR + r) * 4, 4);
    write_tile_rows(plan, w.gathered.data(), stride, panel);
}

// A rank-1 panel of byte rows straight into a tile kernel's layout: each
// row's part of each inner block looked up (or copied, a_as_is) into its
// place, zeros past it (through a row buffer and then copied, the lookup
// and the copy were a fifth of a channels-last pointwise conv2d).
void pack_a_tile_rows(const KernelTable &kt, const U8Plan &plan, int64_t panel_index, uint8_t *panel,
                      int64_t *corr_out, Workspace &w) {
    const MatmulProblem &p = plan.p;
    const U8Factors &fit = *plan.fit;
    const int64_t MR = plan.MR;
    for (int64_t r = 0; r < MR; ++r) {
        const uint8_t *src = a_byte_row(p, panel_index * MR + r, w);
        int64_t sum = 0;
        for_each_tile_block(plan, [&](int64_t kq0, int64_t kqn, int64_t row) {
            uint8_t *dst = panel + kq0 * MR * 4 + r * row;
            const int64_t real = src == nullptr ? 0 : std::clamp<int64_t>(p.inner - kq0 * 4, 0, kqn * 4);
            if (real > 0 && plan.a_as_is)
                std::memcpy(dst, src + kq0 * 4, static_cast<size_t>(real));
            else if (real > 0)
                kt.u8_lut(real, src + kq0 * 4, fit.a_lut.data(), dst);
            if (fit.b_offset[0] != 0) sum += byte_sum(dst, real, fit.a_signed);
            std::memset(dst + real, 0, static_cast<size_t>(row - real));
        });
        corr_out[r] = fit.b_offset[0] * sum;
    }
}

// Panel `panel_index` of A (rows panel_index * MR ..) into `panel` in the
// kernel's layout, and each row's correction sum_r vo_r sum_k u_r(A[i,k])
// into corr[0..MR).
void pack_a_panel(const KernelTable &kt, const U8Plan &plan, int64_t panel_index, uint8_t *panel,
                  int64_t *corr_out, Workspace &w) {
    const MatmulProblem &p = plan.p;
    const U8Factors &fit = *plan.fit;
    const int64_t MR = plan.MR, rank = plan.rank;
    if (plan.a_bytes && rank == 1 && plan.tile_quads > 0) {
        pack_a_tile_rows(kt, plan, panel_index, panel, corr_out, w);
        return;
    }
    if (plan.a_bytes && rank <= 8) {
        // each row looked up whole (a strided row gathered first), its
        // factors' bytes side by side at inner step k * rank + q (a whole
        // block is kc * rank = kqb * 4 steps), zero quads past the rows and
        // the inner size, then interleaved (or, for tiles, copied as rows).
        // Rank 1 looks up by vector; higher ranks store each element's steps
        // as one word, the next element's store overwriting the excess
        const int64_t kq_n = plan.kq_total, stride = kq_n * 4, steps = p.inner * rank;
        w.row.resize(static_cast<size_t>(MR * stride + 8));
        for (int64_t r = 0; r < MR; ++r) {
            uint8_t *row = w.row.data() + r * stride;
            corr_out[r] = 0;
            const uint8_t *src = a_byte_row(p, panel_index * MR + r, w);
            if (src == nullptr) {
                std::memset(row, 0, static_cast<size_t>(stride));
                continue;
            }
            if (rank == 1) {
                kt.u8_lut(p.inner, src, fit.a_lut.data(), row);
                if (fit.b_offset[0] != 0) corr_out[r] = fit.b_offset[0] * byte_sum(row, p.inner, fit.a_signed);
            } else {
                int64_t corr = 0;
                for (int64_t k = 0; k < p.inner; ++k) {
                    std::memcpy(row + k * rank, fit.a_steps[src[k]].data(), 8);
                    corr += fit.a_corr[src[k]];
                }
                corr_out[r] = corr;
            }
            std::memset(row + steps, 0, static_cast<size_t>(stride - steps));
        }
        if (plan.tile_quads > 0)
            write_tile_rows(plan, w.row.data(), stride, panel);
        else
            interleave_quads(w.row.data(), stride, MR, kq_n, panel);
        return;
    }
    std::memset(panel, 0, static_cast<size_t>(plan.panel_bytes));
    for (int64_t r = 0; r < MR; ++r) {
        const int64_t i = panel_index * MR + r;
        int64_t corr = 0;
        if (i < p.rows)
            with_codes(p.a, plan.mask, [&](auto code) {
                for (int64_t k = 0; k < p.inner; ++k) {
                    const uint32_t x = code(i, k) & 0xff;
                    const int64_t kb = k / plan.kc, t = (k - kb * plan.kc) * rank;
                    for (int q = 0; q < rank; ++q) {
                        const int64_t tt = kb * plan.kqb * 4 + t + q;
                        panel[((tt >> 2) * MR + r) * 4 + (tt & 3)] = fit.a_lut[q * 256 + x];
                        corr += fit.b_offset[q] * fit.a_value[q * 256 + x];
                    }
                }
            });
        corr_out[r] = plan.any_offset ? corr : 0;
    }
    if (plan.tile_quads > 0) to_tile_rows(plan, panel, w);
}

// B's columns j0..j0+nj over inner steps k0..k0+nk as quads in w.b (NR-column
// panels, kquads * NR * 4 bytes apart, the returned stride).
int64_t pack_b_block(const KernelTable &kt, const U8Plan &plan, int64_t j0, int64_t nj,
                     int64_t k0, int64_t nk, Workspace &w, uint8_t *dst) {
    const MatmulProblem &p = plan.p;
    const int64_t rank = plan.rank;
    const int64_t kquads = ceil_div(nk * rank, 4);
    const uint8_t *rows_base;
    int64_t rows_stride;
    const int64_t *offsets = plan.b_row_offsets != nullptr ? plan.b_row_offsets + k0 : nullptr;
    const int64_t panel_stride = kquads * plan.NR * 4;
    const bool bytes = p.b.dtype == APPROXMUL_UINT8 || p.b.dtype == APPROXMUL_INT8;
    if (bytes && p.b.row_stride == 1 && p.b.col_stride != 1 && rank == 1 && offsets == nullptr &&
        kt.u8_pack_columns != nullptr) {
        const uint8_t *lut = plan.fit->b_flip >= 0 ? nullptr : plan.fit->b_lut.data();
        const auto *cols = static_cast<const uint8_t *>(p.b.data) + k0 + j0 * p.b.col_stride;
        const int64_t whole = nk / 4;
        kt.u8_pack_columns(nj, cols, p.b.col_stride, whole, lut, plan.fit->b_flip, dst, panel_stride);
        if (whole < kquads)  // the last quad's padding steps (A is 0 there) repeat step nk - 1
            for (int64_t j = 0; j < nj; ++j)
                for (int64_t h = 0; h < 4; ++h) {
                    const uint8_t x = cols[j * p.b.col_stride + std::min(whole * 4 + h, nk - 1)];
                    dst[(j / plan.NR) * panel_stride + whole * plan.NR * 4 + (j % plan.NR) * 4 + h] =
                        lut != nullptr ? lut[x] : static_cast<uint8_t>(x ^ plan.fit->b_flip);
                }
        return panel_stride;
    }
    if (plan.b_bytes) {
        rows_base = static_cast<const uint8_t *>(p.b.data) + (offsets ? 0 : k0 * p.b.row_stride) + j0;
        rows_stride = p.b.row_stride;
    } else {
        // (column-major bytes by 8x8 transposes: element by element, the
        // weights of a 64-image 1024->1024 pointwise conv2d took half its time)
        uint8_t *codes = block_codes(plan, w);
        pack_codes(p.b, plan.mask, k0, nk, j0, nj, codes, nj);
        rows_base = codes;
        rows_stride = nj;
    }
    for (int64_t kq = 0; kq < kquads; ++kq) {
        const uint8_t *rows[4];
        const uint8_t *luts[4];
        for (int h = 0; h < 4; ++h) {
            int64_t t = kq * 4 + h;
            // padding steps (A is 0 there) reuse the last real row
            if (t >= nk * rank) t = nk * rank - 1;
            rows[h] = rows_base + (offsets ? offsets[t / rank] : (t / rank) * rows_stride);
            luts[h] = plan.fit->b_lut.data() + (t % rank) * 256;
        }
        kt.u8_pack(nj, rows, plan.fit->b_flip >= 0 ? nullptr : luts, plan.fit->b_flip,
                   dst + kq * plan.NR * 4, panel_stride);
    }
    return panel_stride;
}

// One job of the A row block starting at panel pb0 (pbn panels packed in
// apack, their corrections in row_corr): its output block over every inner
// block (pack B, micro-kernel loop, widening), then the store.
void run_job(const KernelTable &kt, const U8Plan &plan, const CrossTerms &cross, int64_t job,
             int64_t pb0, int64_t pbn, const uint8_t *apack, const int64_t *row_corr,
             const uint8_t *bpack, Workspace &w) {
    const MatmulProblem &p = plan.p;
    const int64_t MR = plan.MR, NR = plan.NR, ldc = plan.ldc;
    const int64_t rj = job / plan.col_jobs, cj = job % plan.col_jobs;
    const int64_t pi0 = rj * plan.mcp, ip_count = std::min(plan.mcp, pbn - pi0);
    const int64_t i0 = (pb0 + pi0) * MR, j0 = cj * plan.ncp * NR;
    const int64_t ni = std::min(ip_count * MR, p.rows - i0), nj = std::min(plan.ncp * NR, p.cols - j0);
    const int64_t jp_count = ceil_div(nj, NR);
    const size_t b_size = static_cast<size_t>(plan.ncp * plan.kqb * NR * 4 + plan.b_slack);
    const TileSession tiles(kt);
    if (bpack == nullptr && !plan.own_pack && w.b.size() < b_size)  // panel columns past nj read as 0
        std::memset(w.b.reserve(b_size), 0, b_size);
    w.c.reserve(static_cast<size_t>(plan.mcp * MR * ldc));
    if (plan.wide) w.wide.reserve(static_cast<size_t>(plan.mcp * MR * ldc));
    for (int64_t kb = 0; kb < plan.k_blocks; ++kb) {
        const int64_t k0 = kb * plan.kc, nk = std::min(plan.kc, p.inner - k0);
        const int64_t kquads = ceil_div(nk * plan.rank, 4);
        const int64_t block = cj * plan.k_blocks + kb;
        const uint8_t *b;
        int64_t panel_stride = kquads * NR * 4;
        if (bpack != nullptr) {
            b = bpack + block * plan.b_block_bytes;
        } else if (plan.own_pack) {
            b = w.own_b.get(block, plan.col_jobs * plan.k_blocks, plan.b_block_bytes,
                            [&](uint8_t *dst) { pack_b_block(kt, plan, j0, nj, k0, nk, w, dst); });
        } else {
            b = w.b.data();
            panel_stride = pack_b_block(kt, plan, j0, nj, k0, nk, w, w.b.data());
        }
        const bool accumulate = kb % plan.blocks_per_flush != 0;
        for (int64_t jp = 0; jp < jp_count; ++jp)
            for (int64_t ip = 0; ip < ip_count; ++ip)
                kt.u8_micro(kquads, apack + (pi0 + ip) * plan.panel_bytes + kb * plan.kqb * MR * 4,
                            b + jp * panel_stride, w.c.data() + ip * MR * ldc + jp * NR,
                            ldc, accumulate, plan.fit->a_signed);
        const bool flush = kb % plan.blocks_per_flush == plan.blocks_per_flush - 1 ||
                           kb == plan.k_blocks - 1;
        if (plan.wide && flush) {
            const bool first = kb < plan.blocks_per_flush;
            for (int64_t i = 0; i < ni; ++i)
                for (int64_t j = 0; j < nj; ++j)
                    w.wide[i * ldc + j] = (first ? 0 : w.wide[i * ldc + j]) + w.c[i * ldc + j];
        }
    }
    const int64_t *rc = row_corr + pi0 * MR;
    if (plan.wide)
        store_block(p.c, cross, 0, i0, j0, ni, nj, w.wide.data(), ldc, w.col_term, rc, p.c_scale);
    else
        store_block(p.c, cross, 0, i0, j0, ni, nj, w.c.data(), ldc, w.col_term, rc, p.c_scale);
}

}  // namespace

std::array<U8Factors, 2> fit_u8_factors(const Int16Factors &f, int bits) {
    std::array<U8Factors, 2> fits;
    const int64_t side = int64_t{1} << bits;
    const uint32_t mask = static_cast<uint32_t>(side - 1);
    for (int flipped = 0; flipped < 2; ++flipped) {
        const auto &u = flipped ? f.v : f.u;
        const auto &v = flipped ? f.u : f.v;
        U8Factors &fit = fits[static_cast<size_t>(flipped)];
        if (!fit_bytes(u, v, f.rank, side, mask, false, fit) &&
            !fit_bytes(u, v, f.rank, side, mask, true, fit))
            fit = U8Factors{};
    }
    return fits;
}

bool u8_gemm(const KernelTable &kt, const MatmulProblem &p0) {
    const Multiplier &m = *p0.multiplier;
    if (kt.u8_micro == nullptr || m.bits() > 8 || p0.rows == 0 || p0.cols == 0 || p0.inner == 0 ||
        (m.plan() != Plan::ExactGemm && m.plan() != Plan::Factorized))
        return false;
    U8Plan plan;
    if (!fit_problem(kt, p0, plan) || !block_inner(plan)) return false;
    split_jobs(plan);
    // rows by pointer only where B's bytes are read directly and never summed
    if (plan.b_row_offsets != nullptr && (!plan.b_bytes || plan.p.a_zero_point != 0)) return false;
    const MatmulProblem &p = plan.p;
    const CrossTerms cross(p);
    const int64_t packed_panels = std::min(plan.block_panels, plan.mpanels);
    // from the scratch cache: a batch-1 conv2d layer's weights are megabytes
    // of A, and a fresh allocation faults in every page on every call
    const Scratch<uint8_t> apack(static_cast<size_t>(packed_panels * plan.panel_bytes));
    std::vector<int64_t> row_corr(static_cast<size_t>(packed_panels * plan.MR));
    // (one region of jobs: A in one row block)
    plan.own_pack = plan.mpanels <= plan.block_panels &&
                    own_pack_fits(plan.threads, plan.row_jobs, plan.col_jobs * plan.k_blocks,
                                  plan.b_block_bytes);
    const Scratch<uint8_t> bpack = plan.own_pack ? Scratch<uint8_t>() : pack_shared<Workspace>(
        plan.row_jobs, plan.col_jobs, plan.k_blocks, plan.b_block_bytes, plan.threads,
        [&](int64_t block, Workspace &w, uint8_t *dst) {
            const int64_t cj = block / plan.k_blocks, kb = block % plan.k_blocks;
            const int64_t j0 = cj * plan.ncp * plan.NR, k0 = kb * plan.kc;
            pack_b_block(kt, plan, j0, std::min(plan.ncp * plan.NR, p.cols - j0), k0,
                         std::min(plan.kc, p.inner - k0), w, dst);
        });
    for (int64_t pb0 = 0; pb0 < plan.mpanels; pb0 += plan.block_panels) {
        const int64_t pbn = std::min(plan.block_panels, plan.mpanels - pb0);
        const int64_t block_jobs = ceil_div(pbn, plan.mcp) * plan.col_jobs;
        const int block_threads = static_cast<int>(std::min<int64_t>(plan.threads, block_jobs));
        // a second parallel region per call only from 64 KiB of packed A
        // (each region waits for every thread, which on a loaded machine can
        // mean a scheduler period); the earlier 4 MiB bound left 256x2304x196
        // packing on one thread while the other waited (2 threads: 252 -> 340 G/s)
        const int pack_threads = pbn * plan.panel_bytes * plan.rank < (int64_t{64} << 10)
                                     ? 1
                                     : std::min<int>(block_threads, static_cast<int>(pbn));
        parallel_for_each<Workspace>(pbn, pack_threads, [&](int64_t pi, Workspace &w) {
            pack_a_panel(kt, plan, pb0 + pi, apack.data() + pi * plan.panel_bytes,
                         row_corr.data() + pi * plan.MR, w);
        });
        parallel_for_each<Workspace>(block_jobs, block_threads, [&](int64_t job, Workspace &w) {
            run_job(kt, plan, cross, job, pb0, pbn, apack.data(), row_corr.data(),
                    bpack.size() != 0 ? bpack.data() : nullptr, w);
        });
    }
    return true;
}

}  // namespace approxmul::kernels
