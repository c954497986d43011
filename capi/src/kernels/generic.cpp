// Portable kernels: correct for every multiplier, operand type and stride,
// and the reference the instruction-set specific kernels are tested against.
//
// The GEMM is tiled: each tile of TileRows x TileCols outputs is computed by
// one thread, walking the inner dimension in blocks of TileInner. Operands
// are packed per block into the form the multiplier's "product step" wants
// (table row pointers and column indices, or plain values), so the inner
// loop is the same template for every plan. Workspace is per thread and
// independent of the problem size.
#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/threads.hpp"
#include "common.hpp"
#include "drivers.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

namespace {

constexpr int64_t TileRows = 32;
constexpr int64_t TileCols = 256;
constexpr int64_t TileInner = 256;

// Table plan: the first operand selects a table row, the second a column.
struct TableStep {
    const int32_t *table;
    int bits;
    uint32_t mask;
    using A = const int32_t *;
    using B = uint16_t;
    A pack_a(int64_t v) const { return table + ((static_cast<uint32_t>(v) & mask) << bits); }
    B pack_b(int64_t v) const { return static_cast<B>(static_cast<uint32_t>(v) & mask); }
    int64_t operator()(A a, B b) const { return a[b]; }
};

// Exact plan: the product is a*b, computed in the accumulator type.
struct ExactStep {
    using A = int64_t;
    using B = int64_t;
    A pack_a(int64_t v) const { return v; }
    B pack_b(int64_t v) const { return v; }
    int64_t operator()(A a, B b) const { return a * b; }
};

// Function plan: the multiplier's model computes the products, a tile's
// outer product at a time (accumulate_block below).
struct FunctionStep {
    const Multiplier *m;
    using A = int64_t;
    using B = int64_t;
    A pack_a(int64_t v) const { return v; }
    B pack_b(int64_t v) const { return v; }
    int64_t operator()(A a, B b) const { return m->product(a, b); }
};

// acc[i][j] += sum over k < nk of M(a[i][k], b[k][j]) on packed operands
// (rows of a TileInner apart, of b and acc TileCols apart).
template <typename Acc, typename Step>
void accumulate_block(const Step &step, const typename Step::A *a, const typename Step::B *b,
                      int64_t ni, int64_t nk, int64_t nj, Acc *acc) {
    for (int64_t i = 0; i < ni; ++i)
        for (int64_t k = 0; k < nk; ++k) {
            const auto x = a[i * TileInner + k];
            const auto *row = &b[k * TileCols];
            for (int64_t j = 0; j < nj; ++j) acc[i * TileCols + j] += static_cast<Acc>(step(x, row[j]));
        }
}

// One model call per step along k: a model that evaluates products in
// blocks (a netlist simulated bit-sliced, 2,048 pairs per pass over its
// gates) gets up to TileRows x TileCols of them at once.
template <typename Acc>
void accumulate_block(const FunctionStep &step, const int64_t *a, const int64_t *b, int64_t ni,
                      int64_t nk, int64_t nj, Acc *acc) {
    if (step.m->has_block_function()) {  // the whole block in one call, on int64 sums
        if constexpr (std::is_same_v<Acc, int64_t>) {
            step.m->block_function()(ni, nk, nj, a, TileInner, b, TileCols, acc, TileCols);
        } else {  // int32 outputs: the accumulator check bounds the sums
            thread_local std::vector<int64_t> sums;
            sums.assign(TileRows * TileCols, 0);
            step.m->block_function()(ni, nk, nj, a, TileInner, b, TileCols, sums.data(), TileCols);
            for (int64_t i = 0; i < ni; ++i)
                for (int64_t j = 0; j < nj; ++j)
                    acc[i * TileCols + j] += static_cast<Acc>(sums[size_t(i * TileCols + j)]);
        }
        return;
    }
    thread_local std::vector<int64_t> products;
    products.resize(TileRows * TileCols);
    int64_t column[TileRows];
    for (int64_t k = 0; k < nk; ++k) {
        for (int64_t i = 0; i < ni; ++i) column[i] = a[i * TileInner + k];
        step.m->outer_products(column, ni, &b[k * TileCols], nj, products.data());
        for (int64_t i = 0; i < ni; ++i)
            for (int64_t j = 0; j < nj; ++j)
                acc[i * TileCols + j] += static_cast<Acc>(products[size_t(i * nj + j)]);
    }
}

// Acc is also the output type: the accumulator check makes int32 safe.
template <typename Acc, typename Step>
void tiled_gemm(const MatmulProblem &p, const Step &step) {
    const int64_t row_tiles = (p.rows + TileRows - 1) / TileRows;
    const int64_t col_tiles = (p.cols + TileCols - 1) / TileCols;
    const int64_t tiles = row_tiles * col_tiles;
    const auto a_sums = cross_sums(p.a, true, p.b_zero_point, p.a_row_sums);
    const auto b_sums = cross_sums(p.b, false, p.a_zero_point, p.b_col_sums);
    const int64_t constant = p.inner * p.a_zero_point * p.b_zero_point;
    const int threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(
        p.threads > 0 ? p.threads : num_threads(), tiles)));

    struct Workspace {  // one per thread, made on it (parallel_for_each)
        std::vector<typename Step::A> a = std::vector<typename Step::A>(TileRows * TileInner);
        std::vector<typename Step::B> b = std::vector<typename Step::B>(TileInner * TileCols);
        std::vector<Acc> acc = std::vector<Acc>(TileRows * TileCols);
    };
    parallel_for_each<Workspace>(tiles, threads, [&](int64_t tile, Workspace &w) {
        const int64_t i0 = tile / col_tiles * TileRows, j0 = tile % col_tiles * TileCols;
        const int64_t ni = std::min(TileRows, p.rows - i0), nj = std::min(TileCols, p.cols - j0);
        std::fill(w.acc.begin(), w.acc.end(), Acc{0});
        for (int64_t k0 = 0; k0 < p.inner; k0 += TileInner) {
            const int64_t nk = std::min(TileInner, p.inner - k0);
            for (int64_t i = 0; i < ni; ++i)
                for (int64_t k = 0; k < nk; ++k)
                    w.a[i * TileInner + k] = step.pack_a(load(p.a, i0 + i, k0 + k));
            for (int64_t k = 0; k < nk; ++k)
                for (int64_t j = 0; j < nj; ++j)
                    w.b[k * TileCols + j] = step.pack_b(load(p.b, k0 + k, j0 + j));
            accumulate_block(step, w.a.data(), w.b.data(), ni, nk, nj, w.acc.data());
        }
        for (int64_t i = 0; i < ni; ++i)
            for (int64_t j = 0; j < nj; ++j) {
                int64_t value = w.acc[i * TileCols + j];
                if (!a_sums.empty()) value -= p.b_zero_point * a_sums[i0 + i];
                if (!b_sums.empty()) value -= p.a_zero_point * b_sums[j0 + j];
                store<Acc>(p.c, i0 + i, j0 + j, value + constant);
            }
    });
}

template <typename Step>
void gemm(const MatmulProblem &p, const Step &step) {
    if (p.c.dtype == APPROXMUL_INT32)
        tiled_gemm<int32_t>(p, step);
    else
        tiled_gemm<int64_t>(p, step);
}

// Function models with a dot function (vendor C models): each output's sum
// over a block of the inner dimension in one call, the naive loop's order,
// over B's block of columns transposed into int64 values. c: int64 in
// memory order (generic_matmul's staging), zero points applied here.
void dot_gemm(const MatmulProblem &p) {
    constexpr int64_t BlockCols = 64, BlockInner = 1024;
    const Multiplier &m = *p.multiplier;
    const int64_t rows = p.rows, cols = p.cols, inner = p.inner;
    auto *c = static_cast<int64_t *>(const_cast<void *>(p.c.data));
    std::fill(c, c + rows * cols, int64_t{0});
    const int threads = threads_for(p, rows);
    std::vector<int64_t> block(static_cast<size_t>(BlockCols * BlockInner));
    std::vector<std::vector<int64_t>> a_rows(static_cast<size_t>(threads),
                                             std::vector<int64_t>(BlockInner));
    for (int64_t j0 = 0; j0 < cols; j0 += BlockCols) {
        const int64_t nj = std::min(BlockCols, cols - j0);
        for (int64_t k0 = 0; k0 < inner; k0 += BlockInner) {
            const int64_t nk = std::min(BlockInner, inner - k0);
            for (int64_t j = 0; j < nj; ++j)
                for (int64_t k = 0; k < nk; ++k)
                    block[static_cast<size_t>(j * BlockInner + k)] = load(p.b, k0 + k, j0 + j);
            parallel_for(rows, threads, [&](int64_t i, int thread) {
                int64_t *a = a_rows[static_cast<size_t>(thread)].data();
                for (int64_t k = 0; k < nk; ++k) a[k] = load(p.a, i, k0 + k);
                for (int64_t j = 0; j < nj; ++j)
                    c[i * cols + j0 + j] += m.dot(a, &block[static_cast<size_t>(j * BlockInner)], nk);
            });
        }
    }
    const auto a_sums = cross_sums(p.a, true, p.b_zero_point, p.a_row_sums);
    const auto b_sums = cross_sums(p.b, false, p.a_zero_point, p.b_col_sums);
    const int64_t constant = inner * p.a_zero_point * p.b_zero_point;
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            int64_t &value = c[i * cols + j];
            if (!a_sums.empty()) value -= p.b_zero_point * a_sums[i];
            if (!b_sums.empty()) value -= p.a_zero_point * b_sums[j];
            value += constant;
        }
}

// Tables wider than 8 bits (up to 4096 x 4096 entries, 64 MiB): TableStep's
// tiles fetched a table row for every (i, k) and read a few hundred
// scattered entries of it, so nearly every row came from memory again
// (0.35-0.41 G products/s for 12 bits on a Zen 4). Here a task takes a
// chunk of rows and a tile of columns; per block of the inner dimension it
// sorts the chunk's (i, k) by A's code (a counting sort), so each table row
// is fetched once per block, the next one prefetched while this one serves
// every (i, k) that selects it.
void wide_table_gemm(const MatmulProblem &p) {
    // A block holds about Entries (i, k): 32 per code of a 12-bit table,
    // from 256 rows x 512 steps to 64 rows x 2048 (a 64-row chunk with 512
    // steps read 0.57 G/s for 12 bits). Entries: code << 19 | i << 11 | k.
    constexpr int64_t Rows = 256, Cols = 128, MaxInner = 2048, Entries = 131072;
    const Multiplier &m = *p.multiplier;
    const int32_t *table = m.table().data();
    const int bits = m.bits();
    const uint32_t mask = m.operand_mask();
    const size_t codes = size_t{1} << bits;
    const int64_t row_chunks = (p.rows + Rows - 1) / Rows, col_tiles = (p.cols + Cols - 1) / Cols;
    const int64_t tasks = row_chunks * col_tiles;
    const CrossTerms cross(p);
    const int threads = static_cast<int>(std::max<int64_t>(
        1, std::min<int64_t>(p.threads > 0 ? p.threads : num_threads(), tasks)));
    struct Workspace {  // one per thread, made on it (parallel_for_each)
        std::vector<uint16_t> b;        // B's block: codes, Cols a step
        std::vector<uint32_t> entries;  // the chunk's (i, k) in order
        std::vector<uint32_t> sorted;   // and by code
        std::vector<uint32_t> ends;     // per code: the end of its run in sorted
        std::vector<int64_t> acc = std::vector<int64_t>(Rows * Cols);
        std::vector<int64_t> col_term;
    };
    auto prefetch_row = [&](uint32_t code) {
        const char *row = reinterpret_cast<const char *>(table + (size_t{code} << bits));
        for (size_t byte = 0; byte < codes * sizeof(int32_t); byte += 64) __builtin_prefetch(row + byte);
    };
    parallel_for_each<Workspace>(tasks, threads, [&](int64_t task, Workspace &w) {
        const int64_t i0 = task / col_tiles * Rows, j0 = task % col_tiles * Cols;
        const int64_t ni = std::min(Rows, p.rows - i0), nj = std::min(Cols, p.cols - j0);
        const int64_t block = std::min(MaxInner, std::max<int64_t>(512, Entries / ni));
        w.b.resize(size_t(block * Cols));
        w.entries.resize(size_t(ni * block));
        w.sorted.resize(size_t(ni * block));
        std::fill(w.acc.begin(), w.acc.end(), int64_t{0});
        for (int64_t k0 = 0; k0 < p.inner; k0 += block) {
            const int64_t nk = std::min(block, p.inner - k0), n = ni * nk;
            for (int64_t k = 0; k < nk; ++k)
                for (int64_t j = 0; j < nj; ++j)
                    w.b[size_t(k * Cols + j)] = static_cast<uint16_t>(load(p.b, k0 + k, j0 + j) & mask);
            w.ends.assign(codes, 0);
            for (int64_t i = 0; i < ni; ++i)
                for (int64_t k = 0; k < nk; ++k) {
                    const auto code = static_cast<uint32_t>(load(p.a, i0 + i, k0 + k)) & mask;
                    w.entries[size_t(i * nk + k)] = code << 19 | uint32_t(i << 11 | k);
                    ++w.ends[code];
                }
            uint32_t end = 0;  // counts -> each run's start, and after the scatter its end
            for (auto &count : w.ends) end += std::exchange(count, end);
            for (int64_t e = 0; e < n; ++e) {
                const uint32_t entry = w.entries[size_t(e)];
                w.sorted[w.ends[entry >> 19]++] = entry;
            }
            if (n > 0) prefetch_row(w.sorted[0] >> 19);
            for (int64_t e = 0; e < n;) {
                const uint32_t code = w.sorted[size_t(e)] >> 19;
                const int64_t run_end = w.ends[code];
                if (run_end < n) prefetch_row(w.sorted[size_t(run_end)] >> 19);
                const int32_t *row = table + (size_t{code} << bits);
                for (; e < run_end; ++e) {
                    const uint32_t entry = w.sorted[size_t(e)];
                    const uint16_t *columns = w.b.data() + (entry & 2047) * Cols;
                    int64_t *sums = w.acc.data() + ((entry >> 11) & 255) * Cols;
                    for (int64_t j = 0; j < nj; ++j) sums[j] += row[columns[j]];
                }
            }
        }
        store_block(p.c, cross, 0, i0, j0, ni, nj, w.acc.data(), Cols, w.col_term);
    });
}

}  // namespace

void generic_matmul(const MatmulProblem &p) {
    const Multiplier &m = *p.multiplier;
    if (m.plan() == Plan::ExactGemm) return gemm(p, ExactStep{});
    // Other plans are computed from the products themselves on this path.
    if (m.has_table() && m.bits() > 8) return wide_table_gemm(p);
    if (m.has_table()) return gemm(p, TableStep{m.table().data(), m.bits(), m.operand_mask()});
    // A model function may fail part-way: compute into a scratch output so
    // that the caller's output is written only on success.
    std::vector<int64_t> scratch(static_cast<size_t>(p.rows * p.cols));
    MatmulProblem q = p;
    q.c = MatrixView{p.c.name, APPROXMUL_INT64, scratch.data(), p.rows, p.cols, p.cols, 1};
    if (m.has_dot_function())
        dot_gemm(q);
    else
        gemm(q, FunctionStep{&m});
    for (int64_t i = 0; i < p.rows; ++i)
        for (int64_t j = 0; j < p.cols; ++j) {
            const int64_t value = scratch[static_cast<size_t>(i * p.cols + j)];
            if (p.c.dtype == APPROXMUL_INT32)
                store<int32_t>(p.c, i, j, value);
            else
                store<int64_t>(p.c, i, j, value);
        }
}

void generic_multiply(const Multiplier &m, const MatrixView &a, const MatrixView &b,
                      const MatrixView &c) {
    const int threads = a.rows * a.cols > 65536 ? num_threads() : 1;
    parallel_for(a.rows, threads, [&](int64_t i, int) {
        for (int64_t j = 0; j < a.cols; ++j) {
            const int64_t value = m.product(load(a, i, j), load(b, i, j));
            if (c.dtype == APPROXMUL_INT32)
                store<int32_t>(c, i, j, value);
            else
                store<int64_t>(c, i, j, value);
        }
    });
}

}  // namespace approxmul::kernels
