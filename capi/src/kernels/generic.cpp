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

}  // namespace

void generic_matmul(const MatmulProblem &p) {
    const Multiplier &m = *p.multiplier;
    if (m.plan() == Plan::ExactGemm) return gemm(p, ExactStep{});
    // Other plans are computed from the products themselves on this path.
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
