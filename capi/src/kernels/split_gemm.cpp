// split_gemm: products of operands or factors too wide for int16 pairs, as
// GEMMs on their bytes. With x = 2^8 hi(x) + lo(x) (lo in 0..255, hi the
// rest: negative for negative x),
//
//     u v = lo(u) lo(v) + 2^8 (hi(u) lo(v) + lo(u) hi(v)) + 2^16 hi(u) hi(v).
//
// An exact multiplier of 9..16 bits (u, v the operand values), and a
// rank-1 factorized one whose factors span at most 16 bits (16-bit DRUM;
// u, v the factors), split one of u and v: its bytes go against the
// other's int16 values in one int16 GEMM with twice the rows or columns.
// That is two int16 GEMMs' worth of multiply-adds, where three byte GEMMs
// (hi hi, the middle part over twice the inner size, lo lo) are four byte
// GEMMs' worth: the same on AVX-512 VNNI (vpdpbusd does twice vpdpwssd's
// products) and half on AVX2 (byte products run on int16 pairs there); one
// GEMM packs less. Measured on a Zen 4 with VNNI: 0.8-1.0x of the three
// byte GEMMs' time (docs/benchmarks.md). Where the byte GEMM runs on AMX
// tiles (16384 byte products per instruction, the int16 GEMM still on
// vpdpwssd) the three byte GEMMs run instead: 0.42-0.78x of the time of
// the int16 GEMM of bytes on an Emerald Rapids (docs/benchmarks.md).
// Factorizations of rank 2 or 3 whose factors exceed int16,
// M(a, b) = sum_r u_r(a) v_r(b), split their factors in the multiplier
// instead: each part summed over r is a factorized multiplier (ranks r, 2r,
// r) whose factors fit int16, which int16_gemm runs through its factor
// tables. Either way the parts are combined in int64 with their weights,
// and the zero points' cross terms are exact and linear,
// whatever M is.
#include <array>
#include <memory>
#include <vector>

#include "../core/error.hpp"
#include "../core/scratch.hpp"
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
// bytes are stored as int8, byte - 128. A's rows are [hi | lo] (row stride
// 2 inner); B's rows [lo | hi] (row stride 2 cols) or, stacked, B is
// [lo ; hi] (2 rows x cols: the byte GEMMs' middle part over 2 inner steps).
struct ByteSplit {
    Scratch<int8_t> bytes;
    // sums of the stored bytes along each row (A) or column (B)
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
                      bool sum_rows, int threads, bool stacked = false) {
    ByteSplit s;
    const int64_t rows = v.rows, cols = v.cols;
    s.bytes = Scratch<int8_t>(static_cast<size_t>(2 * rows * cols));
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
            int8_t *row = s.bytes.data() + i * 2 * cols;
            int8_t *hi = sum_rows ? row : stacked ? s.bytes.data() + (rows + i) * cols : row + cols;
            int8_t *lo = sum_rows ? row + cols : stacked ? s.bytes.data() + i * cols : row;
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

// How a byte-split plan's operands become w, and the offsets oa, ob of
// S = sum_k (w_A - oa)(w_B - ob) (exact plans: plus the problem's zero
// points, whose cross terms are then included; factorized ones add those of
// the codes). Not copied: the maps point into the multiplier's ByteFactors.
struct SplitMaps {
    bool exact = false;
    ByteMap a{0, 0, nullptr}, b{0, 0, nullptr};
    int64_t oa = 0, ob = 0;
};

// False when a factorized plan's factors span more than 16 bits.
bool split_maps(const MatmulProblem &problem, SplitMaps &s) {
    const Multiplier &m = *problem.multiplier;
    s.exact = m.plan() == Plan::ExactGemm;
    const uint32_t mask = m.operand_mask();
    s.a = s.b = ByteMap{mask, 0, nullptr};
    if (s.exact) {
        s.a.offset = s.b.offset = m.is_signed() ? (mask >> 1) + 1 : 0;
        s.oa = problem.a_zero_point + s.a.offset, s.ob = problem.b_zero_point + s.b.offset;
        return true;
    }
    const ByteFactors &f = m.byte_factors();
    if (f.u.empty()) return false;
    s.oa = f.u_offset, s.ob = f.v_offset;
    s.a.lut = f.u.data(), s.b.lut = f.v.data();
    return true;
}

// The rows of the int64 sums S, or of scratch written to C at the end.
struct SumRows {
    const MatrixView *c;
    bool in_place;  // C is int64 with rows in memory order: S is written there
    Scratch<int64_t> scratch;
    explicit SumRows(const MatrixView &out)
        : c(&out),
          in_place(out.dtype == APPROXMUL_INT64 && out.col_stride == 1),
          scratch(in_place ? 0 : static_cast<size_t>(out.rows * out.cols)) {}
    int64_t *row(int64_t i) const {
        return in_place ? static_cast<int64_t *>(const_cast<void *>(c->data)) + i * c->row_stride
                        : scratch.data() + i * c->cols;
    }
    void store(int64_t i) const {
        if (in_place) return;
        const int64_t *t = row(i);
        for (int64_t j = 0; j < c->cols; ++j) store_value(*c, i, j, t[j]);
    }
};

// An operand's w - 2^15 as int16 (rows in memory order), and the sums of w
// along its rows (sum_rows) or columns.
struct Int16Side {
    Scratch<int16_t> values;
    std::vector<int64_t> w_sums;
};

// One row of int16_side: out[j] = w - 2^15 of code(j), w added to *row_sum
// (col_sums nullptr) or to col_sums[j]. Bounds and pointers are parameters,
// so that nothing read in the loop may alias the stores (the compiler then
// vectorises the rows of 16-bit codes without a lut).
template <typename Code>
void int16_row(Code code, int64_t n, uint32_t mask, uint32_t offset, const uint16_t *lut,
               int16_t *__restrict out, int64_t *__restrict col_sums, int64_t *row_sum) {
    auto w_of = [=](int64_t j) {
        const uint32_t c = static_cast<uint32_t>(code(j)) & mask;
        return lut != nullptr ? int32_t{lut[c]} : static_cast<int32_t>((c + offset) & mask);
    };
    if (col_sums == nullptr) {
        int64_t sum = 0;
        for (int64_t j = 0; j < n; ++j) {
            const int32_t w = w_of(j);
            out[j] = static_cast<int16_t>(w - 32768);
            sum += w;
        }
        *row_sum = sum;
        return;
    }
    for (int64_t j = 0; j < n; ++j) {
        const int32_t w = w_of(j);
        out[j] = static_cast<int16_t>(w - 32768);
        col_sums[j] += w;
    }
}

Int16Side int16_side(const MatrixView &v, const ByteMap &map, bool sum_rows, int threads) {
    const int64_t rows = v.rows, cols = v.cols;
    Int16Side s;
    s.values = Scratch<int16_t>(static_cast<size_t>(rows * cols));
    s.w_sums.assign(static_cast<size_t>(sum_rows ? rows : cols), 0);
    std::vector<int64_t> partial(static_cast<size_t>(sum_rows ? 0 : threads * cols), 0);
    const bool rows_16 = v.col_stride == 1 && (v.dtype == APPROXMUL_INT16 || v.dtype == APPROXMUL_UINT16);
    parallel_for(rows, threads, [&](int64_t i, int thread) {
        int16_t *out = s.values.data() + i * cols;
        int64_t *col_sums = sum_rows ? nullptr : partial.data() + thread * cols;
        int64_t *row_sum = sum_rows ? s.w_sums.data() + i : nullptr;
        if (rows_16) {  // 16-bit rows in memory order, read directly
            const uint16_t *src = static_cast<const uint16_t *>(v.data) + i * v.row_stride;
            auto code = [src](int64_t j) { return src[j]; };
            if (map.lut == nullptr) {
                int16_row(code, cols, map.mask, map.offset, nullptr, out, col_sums, row_sum);
                return;
            }
            // table lookups do not vectorise: they fill a short run of
            // words first, which the vectorised loop then reads
            constexpr int64_t kWords = 512;
            alignas(64) uint16_t words[kWords];
            int64_t sum = 0;
            for (int64_t j = 0; j < cols; j += kWords) {
                const int64_t m = std::min(kWords, cols - j);
                for (int64_t t = 0; t < m; ++t) words[t] = map.lut[src[j + t] & map.mask];
                int64_t run_sum = 0;
                int16_row([&words](int64_t t) { return words[t]; }, m, 0xffff, 0, nullptr, out + j,
                          col_sums != nullptr ? col_sums + j : nullptr, &run_sum);
                sum += run_sum;
            }
            if (row_sum != nullptr) *row_sum = sum;
            return;
        }
        with_codes(v, map.mask, [&](auto code) {
            int16_row([&](int64_t j) { return code(i, j); }, cols, map.mask, map.offset, map.lut,
                      out, col_sums, row_sum);
        });
    });
    for (size_t x = 0; x < partial.size(); ++x) s.w_sums[x % static_cast<size_t>(cols)] += partial[x];
    return s;
}

// The int16 GEMM's models for bytes_by_int16, on raw 16-bit patterns x:
// byte(x) = x's low byte as int8 (b - 128 for a stored byte b; raw or
// sign-extended alike: packed by widening), value(x) = x as int16; u =
// byte, v = value (bytes as A) or the reverse. |u v| <= 2^22, so int32
// sums hold 511 inner steps.
const Multiplier &bytes_by_int16_model(bool bytes_on_a) {
    auto build = [](bool bytes_first) {
        auto byte = [](int64_t x) { return int64_t{static_cast<int8_t>(x & 255)}; };
        auto value = [](int64_t x) { return int64_t{static_cast<int16_t>(x & 0xffff)}; };
        Factorization f;
        f.rank = 1;
        f.u.resize(65536);
        f.v.resize(65536);
        for (uint32_t x = 0; x < 65536; ++x)
            f.u[x] = bytes_first ? byte(x) : value(x), f.v[x] = bytes_first ? value(x) : byte(x);
        auto product = [byte, value, bytes_first](int64_t a, int64_t b) {
            return bytes_first ? byte(a) * value(b) : value(a) * byte(b);
        };
        return Multiplier::from_function(product, 16, true, "bytes by int16", std::move(f));
    };
    static const std::shared_ptr<const Multiplier> bytes_a = build(true), bytes_b = build(false);
    return bytes_on_a ? *bytes_a : *bytes_b;
}

// One int16 GEMM of one operand's bytes against the other's w - 2^15. The
// larger operand gives its bytes (the split is vectorised for any layout;
// an int16 side not in 16-bit rows is gathered per element). With bytes on A, its hi and lo rows interleaved (2
// rows x inner bytes), P = that GEMM holds
//   P[2i, j] = sum_k (hi(w_A) - 128)(w_B - 2^15), P[2i + 1, j] the same of lo, and
//   sum_k w_A w_B = 2^8 P[2i, j] + P[2i + 1, j] + 32896 (colsum(w_B) - 2^15 K)
//                   + 2^15 rowsum(w_A)   (w = 2^8 (hi - 128) + (lo - 128) + 32896)
// and S = sum_k (w_A - oa)(w_B - ob) adds the offsets' terms; with bytes on B (rows
// [lo | hi]) the same with the roles of A and B swapped, lo at P[i, j] and
// hi at P[i, cols + j].
void bytes_by_int16(const KernelTable &kt, const MatmulProblem &problem, const SplitMaps &maps,
                    int threads) {
    const int64_t rows = problem.rows, cols = problem.cols, inner = problem.inner;
    const int64_t oa = maps.oa, ob = maps.ob;
    const bool bytes_on_a = rows >= cols;
    const ByteSplit bytes = bytes_on_a ? split_bytes(kt, problem.a, maps.a, true, threads)
                                       : split_bytes(kt, problem.b, maps.b, false, threads);
    const Int16Side values = bytes_on_a ? int16_side(problem.b, maps.b, false, threads)
                                        : int16_side(problem.a, maps.a, true, threads);
    const CrossTerms cross(maps.exact ? MatmulProblem{} : problem);
    const int64_t part_cols = bytes_on_a ? cols : 2 * cols;
    const Scratch<int64_t> part(static_cast<size_t>(2 * rows * cols));
    MatmulProblem q = problem;
    q.multiplier = &bytes_by_int16_model(bytes_on_a);
    if (bytes_on_a) {
        q.rows = 2 * rows;
        q.a = MatrixView{problem.a.name, APPROXMUL_INT8, bytes.bytes.data(), 2 * rows, inner, inner, 1};
        q.b = MatrixView{problem.b.name, APPROXMUL_INT16, values.values.data(), inner, cols, cols, 1};
    } else {
        q.cols = 2 * cols;
        q.a = MatrixView{problem.a.name, APPROXMUL_INT16, values.values.data(), rows, inner, inner, 1};
        q.b = MatrixView{problem.b.name, APPROXMUL_INT8, bytes.bytes.data(), inner, 2 * cols, 2 * cols, 1};
    }
    q.c = MatrixView{problem.c.name, APPROXMUL_INT64, part.data(), q.rows, q.cols, q.cols, 1};
    q.a_zero_point = q.b_zero_point = 0;
    q.b_pack_cache = nullptr;
    q.a_row_sums = q.b_col_sums = nullptr;
    if (!int16_gemm(kt, q)) fail(APPROXMUL_ERR_INTERNAL, "split_gemm: the int16 GEMM declined bytes by int16");
    // S[i, j] = 2^8 hi + lo + row_term[i] + col_term[j]
    auto a_sum = [&](int64_t i) {
        return bytes_on_a ? bytes.value_sum(static_cast<size_t>(i), inner) : values.w_sums[static_cast<size_t>(i)];
    };
    auto b_sum = [&](int64_t j) {
        return bytes_on_a ? values.w_sums[static_cast<size_t>(j)] : bytes.value_sum(static_cast<size_t>(j), inner);
    };
    std::vector<int64_t> col_terms(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) {
        const int64_t w_sum = b_sum(j);
        col_terms[static_cast<size_t>(j)] =
            (bytes_on_a ? 32896 * (w_sum - 32768 * inner) : 32768 * w_sum) - oa * w_sum;
    }
    const SumRows total(problem.c);
    parallel_for(rows, threads, [&](int64_t i, int) {
        const int64_t w_sum = a_sum(i);
        const int64_t row_term = (bytes_on_a ? 32768 * w_sum : 32896 * (w_sum - 32768 * inner)) -
                                 ob * w_sum + inner * oa * ob;
        int64_t *__restrict t = total.row(i);
        const int64_t *row = part.data() + (bytes_on_a ? 2 * i : i) * part_cols;
        const int64_t *__restrict hi = bytes_on_a ? row : row + cols;
        const int64_t *__restrict lo = bytes_on_a ? row + cols : row;
        const int64_t *__restrict col = col_terms.data();
        for (int64_t j = 0; j < cols; ++j) t[j] = 256 * hi[j] + lo[j] + row_term + col[j];
        if (!maps.exact)
            for (int64_t j = 0; j < cols; ++j) t[j] += cross(i, j);
        total.store(i);
    });
}

// Kernel sets whose byte GEMM runs on tiles: three exact signed 8-bit GEMMs
// of the stored bytes (zero points -128 give the bytes back; the row and
// column byte sums are handed over, not summed again), each folding the
// sums so far into its own as it stores (c_scale 256):
//   S = 2^8 (2^8 HH + (HL + LH)) + LL - ob rowsum(w_A) - oa colsum(w_B) + K oa ob
void byte_gemms(const KernelTable &kt, const MatmulProblem &problem, const SplitMaps &maps,
                int threads) {
    const int64_t rows = problem.rows, cols = problem.cols, inner = problem.inner;
    const int64_t oa = maps.oa, ob = maps.ob;
    const ByteSplit a = split_bytes(kt, problem.a, maps.a, true, threads);
    const ByteSplit b = split_bytes(kt, problem.b, maps.b, false, threads, true);
    // a factorized plan's zero points act on the codes, not on the factors
    const CrossTerms cross(maps.exact ? MatmulProblem{} : problem);
    static const std::shared_ptr<const Multiplier> exact8 = Multiplier::exact(8, true);
    const SumRows total(problem.c);  // not zero-filled: the first GEMM writes all of it
    const MatrixView total_view =
        total.in_place ? problem.c
                       : MatrixView{problem.c.name, APPROXMUL_INT64, total.scratch.data(), rows, cols, cols, 1};
    // the middle part's byte sums are both halves'
    std::vector<int64_t> a_mid(a.hi_sums.size()), b_mid(b.hi_sums.size());
    for (size_t i = 0; i < a_mid.size(); ++i) a_mid[i] = a.hi_sums[i] + a.lo_sums[i];
    for (size_t j = 0; j < b_mid.size(); ++j) b_mid[j] = b.hi_sums[j] + b.lo_sums[j];
    const int8_t *a_hi = a.bytes.data(), *a_lo = a_hi + inner;
    const int8_t *b_lo = b.bytes.data(), *b_hi = b_lo + inner * cols;
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
        q.c = total_view;
        q.c_scale = step == 0 ? 0 : 256;
        q.a_zero_point = q.b_zero_point = -128;
        q.b_pack_cache = nullptr;
        q.a_row_sums = steps[step].a_sums;
        q.b_col_sums = steps[step].b_sums;
        if (!u8_gemm(kt, q)) fail(APPROXMUL_ERR_INTERNAL, "split_gemm: the byte GEMM declined part %d", step);
    }
    std::vector<int64_t> col_terms(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j)
        col_terms[static_cast<size_t>(j)] = -oa * b.value_sum(static_cast<size_t>(j), inner);
    parallel_for(rows, threads, [&](int64_t i, int) {
        int64_t *__restrict t = total.row(i);
        const int64_t row_term = inner * oa * ob - ob * a.value_sum(static_cast<size_t>(i), inner);
        const int64_t *__restrict col = col_terms.data();
        for (int64_t j = 0; j < cols; ++j) t[j] += row_term + col[j];
        if (!maps.exact)
            for (int64_t j = 0; j < cols; ++j) t[j] += cross(i, j);
        total.store(i);
    });
}

// An exact multiplier of 9..16 bits, or a rank-1 factorized one whose
// factors span at most 16 bits (16-bit DRUM), on the operands' bytes.
bool byte_split_gemm(const KernelTable &kt, const MatmulProblem &problem) {
    SplitMaps maps;
    if (!split_maps(problem, maps)) return false;
    const int64_t rows = problem.rows, cols = problem.cols;
    if (rows == 0 || cols == 0 || problem.inner == 0) {  // empty sums (and no pointers into empty bytes)
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j) store_value(problem.c, i, j, 0);
        return true;
    }
    const int threads = threads_for(problem, rows);
    if (kt.u8_tile_quads > 0)
        byte_gemms(kt, problem, maps, threads);
    else
        bytes_by_int16(kt, problem, maps, threads);
    return true;
}

}  // namespace

bool split_gemm(const KernelTable &kernels, const MatmulProblem &problem) {
    const Multiplier &m = *problem.multiplier;
    const bool exact = m.plan() == Plan::ExactGemm && m.bits() > 8;
    const bool wide_factors = m.plan() == Plan::Factorized && !m.factors_fit_int16();
    if (!exact && !wide_factors) return false;
    if (byte_split_gemm(kernels, problem)) return true;
    if (exact) fail(APPROXMUL_ERR_INTERNAL, "split_gemm: no byte GEMMs for an exact plan");
    const Parts &parts = m.split_parts();
    for (const auto &part : parts)
        if (part->plan() != Plan::Factorized) return false;  // factors not in int16 (cannot happen)
    const int64_t rows = problem.rows, cols = problem.cols;
    std::array<Scratch<int64_t>, 3> sums;
    for (size_t k = 0; k < parts.size(); ++k) {
        sums[k] = Scratch<int64_t>(static_cast<size_t>(rows * cols));
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
