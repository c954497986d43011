// int16_gemm: exact and factorized plans. M(a,b) = sum_r u_r(a) v_r(b)
// becomes one integer GEMM over an inner dimension of rank * inner: packing
// replaces A[i,k] by u_0..u_{rank-1} of its code and B[k,j] by v_0..v_{rank-1}
// (int16), pairs of that inner dimension go to vpdpwssd / vpmaddwd. The
// micro-kernel's int32 sums wrap modulo 2^32; they are exact because each
// block of inner steps whose true sum (a sum of products M) provably fits
// int32 is widened to int64 before the next block begins.
//
// Steps: orient the problem (plan), split the inner dimension into packed
// blocks and the outputs into jobs, then per job: pack A's and B's block,
// run the micro-kernel over the tile grid, widen, store.
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "common.hpp"
#include "drivers.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

namespace {

// One call's plan: the oriented problem, its factors, the inner blocking
// and the job grid.
struct Int16Plan {
    MatmulProblem p;
    int64_t MR, NR;
    const int16_t *u, *v;  // rank x side, by raw bit pattern (the model's int16_factors)
    int rank;
    int64_t side;
    uint32_t mask;
    bool plain_b;  // byte rows whose factor is their value: B packs by widening
    // B of bytes in contiguous rows packs through kt.pair_pack, the factors
    // (unless plain_b) as 256-entry tables by raw byte: rank x 256
    bool byte_rows_b;
    std::vector<int16_t> v_bytes;
    // B of 16-bit codes in contiguous rows whose one factor is the code's
    // int16 value (split_gemm's bytes by int16): pairs are copied, not looked up
    bool plain16_b;
    // A of bytes in contiguous rows packs row by row through the same kind
    // of tables: rank x 256 u values by raw byte, or (plain_a: the factor is
    // the byte's value, as for exact 8-bit codes) by widening whole panels
    // (kt->pair_rows)
    bool byte_rows_a, plain_a;
    std::vector<int16_t> u_bytes;
    const KernelTable *kt;

    // inner blocking: kc steps per packed block; int32 sums hold
    // blocks_per_flush blocks, after which (wide) they go to int64
    int64_t kc, blocks_per_flush, k_blocks, kpairs_max;
    bool wide;

    // jobs: row blocks of mcp panels x column blocks of ncp panels
    int64_t mcp, ncp, col_jobs, jobs, ldc;
    int threads;

    // A packed once for every job (shared_a: in the calling thread's reused
    // buffer, in shared_a_storage, or in the caller's cache) when several
    // column jobs would each repack it and it is at most kSharedABytes: k
    // block kb's panels start at kb * a_block_stride, panel ip of that block
    // at ip * kpairs * MR * 2
    bool flipped = false;  // p.a is the caller's B
    const int16_t *shared_a = nullptr;
    std::vector<int16_t> shared_a_storage;  // a packed A too large to keep
    int64_t a_block_stride = 0;
};

// Orientation: the operand that becomes B should be the large one with
// contiguous rows (pixels of conv2d's im2col, a matmul's wide right side),
// because rows of byte codes pack by vector widening or a table lookup per
// element, either side, while strided codes pack one element at a time
// through the general walk (about ten times the cost per element). The
// cost of each orientation, in multiply-accumulates of the micro-kernel:
// its padded tile grid plus each operand's packing. conv2d's 65,536 pixels
// x 144 taps against 16 channels ran 4x faster on AVX2 once the pixels went
// to B, at 12.5 % more padded rows; a 64 x 3136 matmul flipped to save 3 %
// padding ran 3x slower.
constexpr int64_t kPackRows = 8;      // per element (and rank) read along contiguous byte rows
constexpr int64_t kPackStrided = 64;  // per element (and rank) read one strided code at a time

int64_t orientation_cost(const MatmulProblem &p, int64_t MR, int64_t NR, int rank) {
    auto cost = [](const MatrixView &v) {
        const bool bytes = v.dtype == APPROXMUL_UINT8 || v.dtype == APPROXMUL_INT8;
        return bytes && v.col_stride == 1 ? kPackRows : kPackStrided;
    };
    const int64_t padded = ceil_div(p.rows, MR) * MR * ceil_div(p.cols, NR) * NR;
    return padded * p.inner + rank * p.inner * (cost(p.a) * p.rows + cost(p.b) * p.cols);
}

void orient(const KernelTable &kt, const MatmulProblem &p0, Int16Plan &plan) {
    const Multiplier &m = *p0.multiplier;
    plan.MR = kt.gemm_mr;
    plan.NR = kt.gemm_nr;
    plan.side = int64_t{1} << m.bits();
    const Int16Factors &factors = m.int16_factors();
    if (factors.rank == 0) fail(APPROXMUL_ERR_INTERNAL, "int16_gemm: %s has no int16 factors", m.name().c_str());
    plan.rank = factors.rank;
    plan.u = factors.u.data(), plan.v = factors.v.data();
    const MatmulProblem flipped = transposed_problem(p0);
    const bool flip = orientation_cost(flipped, plan.MR, plan.NR, plan.rank) <
                      orientation_cost(p0, plan.MR, plan.NR, plan.rank);
    plan.p = flip ? flipped : p0;
    plan.flipped = flip;
    if (flip) std::swap(plan.u, plan.v);
    plan.mask = m.operand_mask();
    const MatrixView &b = plan.p.b;
    plan.byte_rows_b = b.col_stride == 1 && (b.dtype == APPROXMUL_UINT8 || b.dtype == APPROXMUL_INT8);
    auto by_raw_byte = [&](const int16_t *factor, std::vector<int16_t> &bytes) {
        bytes.resize(static_cast<size_t>(plan.rank) * 256);
        for (int r = 0; r < plan.rank; ++r)
            for (uint32_t raw = 0; raw < 256; ++raw)
                bytes[static_cast<size_t>(r) * 256 + raw] =
                    factor[static_cast<size_t>(r * plan.side + (raw & plan.mask))];
    };
    // a single factor that is the byte's own value (exact 8-bit codes,
    // split_gemm's bytes by int16) packs by widening, without lookups
    auto widening = [&](const std::vector<int16_t> &bytes, bool is_signed) {
        for (uint32_t raw = 0; raw < 256; ++raw)
            if (bytes[raw] != (is_signed ? static_cast<int8_t>(raw) : static_cast<int16_t>(raw)))
                return false;
        return plan.rank == 1;
    };
    if (plan.byte_rows_b) by_raw_byte(plan.v, plan.v_bytes);
    plan.plain_b = plan.byte_rows_b && widening(plan.v_bytes, m.is_signed());
    plan.plain16_b = b.col_stride == 1 && (b.dtype == APPROXMUL_INT16 || b.dtype == APPROXMUL_UINT16) &&
                     (flip ? factors.u_is_int16_value : factors.v_is_int16_value);
    const MatrixView &a = plan.p.a;
    plan.byte_rows_a = a.col_stride == 1 && (a.dtype == APPROXMUL_UINT8 || a.dtype == APPROXMUL_INT8);
    if (plan.byte_rows_a) by_raw_byte(plan.u, plan.u_bytes);
    plan.plain_a = plan.byte_rows_a && widening(plan.u_bytes, a.dtype == APPROXMUL_INT8);
    plan.kt = &kt;
}

// Inner steps per packed block: about 512 transformed values, and no more
// than int32 sums hold exactly. Where that int32 bound sets the size, the
// blocks are of equal size: K = 512 under a 511-step bound as 256 + 256,
// not 511 + 1, whose last block cost a whole pass of packing and widening
// (blocks of 512 values stay as they are: 576 as 288 + 288 rather than
// 512 + 64 measured no faster). False when not even one step fits.
bool block_inner(const Multiplier &m, Int16Plan &plan) {
    const int64_t inner = plan.p.inner;
    const int64_t max_product = m.max_abs_product();
    const int64_t flush_inner =  // inner steps whose true sum fits int32
        max_product == 0 ? inner : std::numeric_limits<int32_t>::max() / max_product;
    if (flush_inner < 1) return false;
    const int64_t most = std::max<int64_t>(
        1, std::min({std::max<int64_t>(1, 512 / plan.rank), flush_inner, inner}));
    plan.k_blocks = ceil_div(inner, most);
    plan.kc = most;
    if (most == flush_inner && plan.k_blocks > 1) {  // blocks of equal size, see above
        plan.kc = ceil_div(inner, plan.k_blocks);
        if (plan.kc % 2 != 0 && plan.kc < most) ++plan.kc;  // whole pairs where rank 1 allows
        plan.k_blocks = ceil_div(inner, plan.kc);
    }
    plan.blocks_per_flush = std::max<int64_t>(1, flush_inner / plan.kc);
    plan.wide = plan.k_blocks > plan.blocks_per_flush;  // int32 sums alone are not enough
    plan.kpairs_max = ceil_div(plan.kc * plan.rank, 2);
    return true;
}

// Jobs: column blocks first (each packs its own B block), rows split only
// until there is enough parallel work.
void split_jobs(Int16Plan &plan) {
    const MatmulProblem &p = plan.p;
    const int64_t MR = plan.MR, NR = plan.NR;
    const int64_t mpanels = ceil_div(p.rows, MR), npanels = ceil_div(p.cols, NR);
    const int64_t target = 4 * static_cast<int64_t>(wanted_threads(p));
    plan.ncp = std::clamp<int64_t>(ceil_div(npanels, target), 1, 512 / NR);
    plan.col_jobs = ceil_div(npanels, plan.ncp);
    const int64_t row_split = plan.col_jobs >= target ? 1 : ceil_div(target, plan.col_jobs);
    plan.mcp = std::clamp<int64_t>(ceil_div(mpanels, row_split), 1, std::max<int64_t>(1, 256 / MR));
    plan.jobs = ceil_div(mpanels, plan.mcp) * plan.col_jobs;
    plan.threads = threads_for(p, plan.jobs);
    plan.ldc = plan.ncp * NR;
}

// A's rows i0..i0+ni, inner steps k0..k0+nk, as MR-row panels of pairs:
// panel[(t / 2) * MR * 2 + r * 2 + t % 2] = u_{t % rank} of A[i, k0 + t / rank].
// Walks t with a (step, factor) counter, a pair per store (no division per
// element: it cost more than the lookup). Rows of bytes read their run
// directly, one table lookup per value (the general walk was a fifth of a
// 256x2304x196 exact GEMM at 2 threads on AVX2).
void pack_a_rows(const Int16Plan &plan, int64_t i0, int64_t ni, int64_t k0, int64_t nk,
                 int64_t kpairs, int16_t *dst) {
    const int64_t MR = plan.MR;
    if (plan.byte_rows_a) {
        const MatrixView &a = plan.p.a;
        const int rank = plan.rank;
        const int64_t steps = nk * rank;
        auto row = [&](int64_t i) {
            return static_cast<const uint8_t *>(a.data) + (i0 + i) * a.row_stride + k0;
        };
        int64_t first = 0;  // rows from here on take the lookups below
        if (plan.plain_a) {
            const int is_signed = a.dtype == APPROXMUL_INT8 ? 1 : 0;
            const uint8_t *rows[16];  // MR <= 16
            for (; first + MR <= ni; first += MR) {
                for (int64_t r = 0; r < MR; ++r) rows[r] = row(first + r);
                int16_t *panel = dst + first / MR * kpairs * MR * 2;
                plan.kt->pair_rows(nk / 2, rows, is_signed, panel);
                if (nk % 2 != 0)
                    for (int64_t r = 0; r < MR; ++r) {
                        panel[(nk / 2 * MR + r) * 2] = plan.u_bytes[rows[r][nk - 1]];
                        panel[(nk / 2 * MR + r) * 2 + 1] = 0;
                    }
            }
        }
        for (int64_t i = first; i < ni; ++i) {
            const uint8_t *src = row(i);
            int16_t *panel = dst + (i / MR) * kpairs * MR * 2 + (i % MR) * 2;
            if (rank == 1) {
                const int16_t *lut = plan.u_bytes.data();
                const int64_t whole = nk / 2;
                for (int64_t kp = 0; kp < whole; ++kp) {
                    panel[kp * MR * 2] = lut[src[2 * kp]];
                    panel[kp * MR * 2 + 1] = lut[src[2 * kp + 1]];
                }
                if (nk % 2 != 0) panel[whole * MR * 2] = lut[src[nk - 1]], panel[whole * MR * 2 + 1] = 0;
                continue;
            }
            // value t = k * rank + r goes to pair t / 2, half t % 2
            int64_t t = 0;
            for (int64_t k = 0; k < nk; ++k)
                for (int r = 0; r < rank; ++r, ++t)
                    panel[(t >> 1) * MR * 2 + (t & 1)] = plan.u_bytes[static_cast<size_t>(r) * 256 + src[k]];
            if (steps % 2 != 0) panel[(steps >> 1) * MR * 2 + 1] = 0;
        }
        return;
    }
    with_codes(plan.p.a, plan.mask, [&](auto code) {
        for (int64_t i = 0; i < ni; ++i) {
            int16_t *panel = dst + (i / MR) * kpairs * MR * 2 + (i % MR) * 2;
            int64_t k = 0;
            int r = 0;
            auto next = [&]() {
                const int16_t value = plan.u[r * plan.side + code(i0 + i, k0 + k)];
                if (++r == plan.rank) r = 0, ++k;
                return value;
            };
            for (int64_t kp = 0; kp < kpairs; ++kp) {
                const int16_t lo = next();
                panel[kp * MR * 2] = lo;
                panel[kp * MR * 2 + 1] = k < nk ? next() : int16_t{0};
            }
        }
    });
}

// pack_a_rows, and zeros in the last panel's rows past ni (the buffers are
// reused, not cleared)
void pack_a_block(const Int16Plan &plan, int64_t i0, int64_t ni, int64_t k0, int64_t nk,
                  int64_t kpairs, int16_t *dst) {
    pack_a_rows(plan, i0, ni, k0, nk, kpairs, dst);
    const int64_t MR = plan.MR;
    for (int64_t i = ni; i < ceil_div(ni, MR) * MR; ++i) {
        int16_t *panel = dst + (i / MR) * kpairs * MR * 2 + (i % MR) * 2;
        for (int64_t kp = 0; kp < kpairs; ++kp) panel[kp * MR * 2] = panel[kp * MR * 2 + 1] = 0;
    }
}

// B's columns j0..j0+nj, inner steps k0..k0+nk, as NR-column panels of pairs.
// Each column's pair (transformed inner indices 2 kp, 2 kp + 1) is written
// whole from two source rows. Rows of bytes go through the kernel set's
// pair_pack, a pair step across all panels per call (it pads the last
// panel itself); other codes through the loops below, into a zeroed block.
void pack_b_block(const KernelTable &kt, const Int16Plan &plan, int64_t j0, int64_t nj,
                  int64_t k0, int64_t nk, int64_t kpairs, int16_t *dst) {
    const MatmulProblem &p = plan.p;
    const int64_t NR = plan.NR, jp_count = ceil_div(nj, NR), steps = nk * plan.rank;
    // pair kp's halves: (step k, factor r) of transformed index t = k * rank + r
    auto half = [&](int64_t t, int64_t &k, int &r) {
        k = k0 + t / plan.rank;
        r = static_cast<int>(t % plan.rank);
        return t < steps;
    };
    if (plan.byte_rows_b) {
        const auto *base = static_cast<const uint8_t *>(p.b.data) + j0;
        const int64_t panel_stride = kpairs * NR * 2;
        for (int64_t kp = 0; kp < kpairs; ++kp) {
            int64_t ka, kb;
            int ra, rb;
            half(2 * kp, ka, ra);
            const bool second = half(2 * kp + 1, kb, rb);
            const uint8_t *rows[2] = {base + ka * p.b.row_stride,
                                      second ? base + kb * p.b.row_stride : nullptr};
            const int16_t *luts[2] = {nullptr, nullptr};
            if (!plan.plain_b) {
                luts[0] = plan.v_bytes.data() + ra * 256;
                luts[1] = plan.v_bytes.data() + (second ? rb : ra) * 256;
            }
            kt.pair_pack(nj, rows, plan.plain_b ? nullptr : luts,
                         p.multiplier->is_signed() ? 1 : 0, dst + kp * NR * 2, panel_stride);
        }
        return;
    }
    if (plan.plain16_b) {  // into a zeroed block
        const auto *base = static_cast<const int16_t *>(p.b.data) + j0;
        for (int64_t kp = 0; kp < kpairs; ++kp) {
            const int16_t *ra = base + (k0 + 2 * kp) * p.b.row_stride;
            const int16_t *rb = 2 * kp + 1 < nk ? ra + p.b.row_stride : nullptr;
            for (int64_t jp = 0; jp < jp_count; ++jp) {
                int16_t *__restrict out = dst + jp * kpairs * NR * 2 + kp * NR * 2;
                const int64_t jn = std::min(NR, nj - jp * NR), jb = jp * NR;
                for (int64_t j = 0; j < jn; ++j) out[2 * j] = ra[jb + j];
                if (rb != nullptr)
                    for (int64_t j = 0; j < jn; ++j) out[2 * j + 1] = rb[jb + j];
            }
        }
        return;
    }
    with_codes(p.b, plan.mask, [&](auto code) {
        for (int64_t jp = 0; jp < jp_count; ++jp) {
            int16_t *panel = dst + jp * kpairs * NR * 2;
            const int64_t jn = std::min(NR, nj - jp * NR), jb = j0 + jp * NR;
            for (int64_t kp = 0; kp < kpairs; ++kp) {
                int16_t *out = panel + kp * NR * 2;
                int64_t ka, kb;
                int ra, rb;
                half(2 * kp, ka, ra);
                const int16_t *lut_a = plan.v + ra * plan.side;
                if (!half(2 * kp + 1, kb, rb)) {
                    for (int64_t j = 0; j < jn; ++j) out[2 * j] = lut_a[code(ka, jb + j)];
                    continue;
                }
                const int16_t *lut_b = plan.v + rb * plan.side;
                for (int64_t j = 0; j < jn; ++j) {
                    out[2 * j] = lut_a[code(ka, jb + j)];
                    out[2 * j + 1] = lut_b[code(kb, jb + j)];
                }
            }
        }
    });
}

// Packed A as several column jobs share it (16 MiB at most): conv2d's
// weights were repacked by every job of every pixel block, a quarter of a
// layer's time on AVX2, and with a 2 MiB limit a rank-2 factorization of a
// 256x2304x196 product repacked its A seven times (2.5x slower than shared
// on a Zen 3; the repacking costs more than reading the shared copy from
// L3 or memory). Where A is the caller's constant B, the packing
// also outlives the call in the caller's cache: conv2d packed the same
// weights again for each of its pixel blocks (8 % of a 64->64 layer).
constexpr int64_t kSharedABytes = int64_t{16} << 20;

void pack_shared_a(Int16Plan &plan, PackCache *cache) {
    const MatmulProblem &p = plan.p;
    const int64_t MR = plan.MR, mpanels = ceil_div(p.rows, MR);
    const int64_t stride = mpanels * plan.kpairs_max * MR * 2;
    if (plan.col_jobs < 2 || stride * plan.k_blocks * 2 > kSharedABytes) return;
    plan.a_block_stride = stride;
    if (!plan.flipped) cache = nullptr;  // A is not the operand the caller keeps
    std::vector<int64_t> key;
    if (cache != nullptr) {
        const MatrixView &a = p.a;
        key = {reinterpret_cast<intptr_t>(a.data), a.dtype, a.rows, a.cols, a.row_stride,
               a.col_stride, MR, plan.kc, plan.k_blocks, plan.kpairs_max, plan.rank,
               reinterpret_cast<intptr_t>(p.multiplier)};
        if (cache->key == key) {
            plan.shared_a = cache->int16.data();
            return;
        }
    }
    // every packed value is written (pack_a_block pads): growing the buffer
    // is the only clearing. Without a cache, the calling thread keeps a
    // buffer of up to kKeptABytes for its next call: a fresh one per call
    // cost its page faults and zeroing, 5 % of a 256x2304x196 exact GEMM at 2
    // threads; larger ones (a smaller share of their call) are the call's
    // own, so that no thread holds more than that between calls.
    constexpr size_t kKeptABytes = size_t{4} << 20;
    const auto size = static_cast<size_t>(stride * plan.k_blocks);
    thread_local std::vector<int16_t> reused;
    std::vector<int16_t> &packed = cache != nullptr            ? cache->int16
                                   : size * 2 <= kKeptABytes ? reused
                                                             : plan.shared_a_storage;
    packed.resize(std::max(packed.size(), size));
    constexpr int64_t kPanelsPerTask = 8;
    const int64_t row_tasks = ceil_div(mpanels, kPanelsPerTask);
    parallel_for(row_tasks * plan.k_blocks, plan.threads, [&](int64_t task, int) {
        const int64_t kb = task / row_tasks, ip0 = task % row_tasks * kPanelsPerTask;
        const int64_t k0 = kb * plan.kc, nk = std::min(plan.kc, p.inner - k0);
        const int64_t kpairs = ceil_div(nk * plan.rank, 2);
        const int64_t i0 = ip0 * MR, ni = std::min(kPanelsPerTask * MR, p.rows - i0);
        pack_a_block(plan, i0, ni, k0, nk, kpairs, packed.data() + kb * stride + ip0 * kpairs * MR * 2);
    });
    plan.shared_a = packed.data();
    if (cache != nullptr) cache->key = std::move(key);
}

// One thread's buffers (parallel_for_each makes one per thread, on it).
struct Workspace {
    std::vector<int16_t> a, b;
    std::vector<int32_t> c;
    std::vector<int64_t> wide, col_term;
};

// One job: its output block over every inner block (pack, micro-kernel
// loop, widening), then the store with the zero-point cross terms.
void run_job(const KernelTable &kt, const Int16Plan &plan, const CrossTerms &cross, int64_t job,
             Workspace &w) {
    const MatmulProblem &p = plan.p;
    const int64_t MR = plan.MR, NR = plan.NR, ldc = plan.ldc;
    if (plan.shared_a == nullptr) w.a.resize(static_cast<size_t>(plan.mcp * MR * plan.kpairs_max * 2));
    w.b.resize(static_cast<size_t>(plan.ncp * NR * plan.kpairs_max * 2));
    w.c.resize(static_cast<size_t>(plan.mcp * MR * ldc));
    if (plan.wide) w.wide.assign(static_cast<size_t>(plan.mcp * MR * ldc), 0);
    const int64_t i0 = job / plan.col_jobs * plan.mcp * MR, j0 = job % plan.col_jobs * plan.ncp * NR;
    const int64_t ni = std::min(plan.mcp * MR, p.rows - i0), nj = std::min(plan.ncp * NR, p.cols - j0);
    const int64_t ip_count = ceil_div(ni, MR), jp_count = ceil_div(nj, NR);
    for (int64_t kb = 0; kb < plan.k_blocks; ++kb) {
        const int64_t k0 = kb * plan.kc, nk = std::min(plan.kc, p.inner - k0);
        const int64_t kpairs = ceil_div(nk * plan.rank, 2);
        const int16_t *a = w.a.data();
        if (plan.shared_a != nullptr) {
            a = plan.shared_a + kb * plan.a_block_stride + i0 / MR * kpairs * MR * 2;
        } else {
            pack_a_block(plan, i0, ni, k0, nk, kpairs, w.a.data());
        }
        if (!plan.byte_rows_b) std::fill(w.b.begin(), w.b.end(), int16_t{0});  // pair_pack pads
        pack_b_block(kt, plan, j0, nj, k0, nk, kpairs, w.b.data());
        const bool accumulate = kb % plan.blocks_per_flush != 0;
        for (int64_t jp = 0; jp < jp_count; ++jp)
            for (int64_t ip = 0; ip < ip_count; ++ip)
                kt.gemm_micro(kpairs, a + ip * kpairs * MR * 2,
                              w.b.data() + jp * kpairs * NR * 2,
                              w.c.data() + ip * MR * ldc + jp * NR, ldc, accumulate);
        const bool flush = kb % plan.blocks_per_flush == plan.blocks_per_flush - 1 ||
                           kb == plan.k_blocks - 1;
        if (plan.wide && flush)
            for (int64_t i = 0; i < ni; ++i)
                for (int64_t j = 0; j < nj; ++j) w.wide[i * ldc + j] += w.c[i * ldc + j];
    }
    if (plan.wide)
        store_block(p.c, cross, 0, i0, j0, ni, nj, w.wide.data(), ldc, w.col_term);
    else
        store_block(p.c, cross, 0, i0, j0, ni, nj, w.c.data(), ldc, w.col_term);
}

}  // namespace

bool int16_gemm(const KernelTable &kt, const MatmulProblem &p0) {
    const Multiplier &m = *p0.multiplier;
    // wider exact operands, and factors beyond int16, do not fit the pairs
    // (split_gemm splits them into bytes first)
    if (m.plan() == Plan::ExactGemm ? m.bits() > 8
                                    : m.plan() != Plan::Factorized || !m.factors_fit_int16())
        return false;
    Int16Plan plan;
    orient(kt, p0, plan);
    if (!block_inner(m, plan)) return false;
    split_jobs(plan);
    pack_shared_a(plan, p0.b_pack_cache);
    const MatmulProblem &p = plan.p;
    const CrossTerms cross(p);
    parallel_for_each<Workspace>(plan.jobs, plan.threads, [&](int64_t job, Workspace &w) {
        run_job(kt, plan, cross, job, w);
    });
    return true;
}

}  // namespace approxmul::kernels
