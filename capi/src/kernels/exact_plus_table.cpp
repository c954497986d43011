// exact_plus_table: models whose error is a sum of functions of digit pairs,
// M(a, b) = a b + sum_p E_p(digit(a), digit(b)): the bytes of 9..16-bit
// models (column truncation and broken arrays: every dropped bit is a
// function of one bit of a and one of b), the low nibbles of 5..8-bit
// tables (cut <= 4). GEMMs through the dispatcher:
//
//     C = exact(A, B) with the problem's zero points + sum_p sum_k E_p(dA, dB),
//
// the first on the exact paths (split_gemm.cpp for wide models), the others
// unsigned 8- or 4-bit table GEMMs of each E_p on the digits (table_gemm.cpp,
// or a factorized plan when E_p has one). The zero points' cross terms belong
// to the exact part only: each E_p is a function of the raw codes.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "../core/scratch.hpp"
#include "common.hpp"
#include "drivers.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

namespace {

// A digit of a view's raw codes, (code & mask) >> shift, as a byte view of
// the same shape: rows in memory order, or columns where only the columns
// are contiguous (conv2d's column-major pixel blocks: transposing them into
// rows took a third of a batch-1 512->512 truncated layer; the table GEMMs
// pack either order), or the operand's own bytes where a table plan masks
// them as it packs. Contiguous codes go through plain loops that the
// compiler vectorises (the element-wise path cost a third of an 8-bit
// truncated GEMM); other views take the generic loader.
struct Digits {
    Scratch<uint8_t> codes;
    MatrixView view;
};

Digits digits(const MatrixView &v, uint32_t mask, int shift, int threads,
              const Multiplier &error_model) {
    const bool by_columns = v.col_stride != 1 && v.row_stride == 1;
    const bool bytes = v.dtype == APPROXMUL_UINT8 || v.dtype == APPROXMUL_INT8;
    if (bytes && shift == 0 && (v.col_stride == 1 || by_columns) &&
        error_model.plan() == Plan::Table) {
        // the table GEMMs mask the bytes as they pack them (pack_codes):
        // the operand itself, without a copy that every thread writes and
        // the other reads (a tenth of a 2-thread 256x2304x196 truncated GEMM)
        MatrixView own = v;
        own.dtype = APPROXMUL_UINT8;  // the same low bits
        return Digits{Scratch<uint8_t>(), own};
    }
    Digits out{Scratch<uint8_t>(static_cast<size_t>(v.rows * v.cols)), {}};
    out.view = MatrixView{v.name, APPROXMUL_UINT8, out.codes.data(), v.rows, v.cols,
                          by_columns ? 1 : v.cols, by_columns ? v.rows : 1};
    if (out.codes.size() == 0) return out;  // an empty view's data may be null: no pointers into it
    uint8_t *const dst = out.codes.data();
    // loop bounds, mask and shift are copied into each loop's own locals: a
    // byte store may alias anything read through a reference, which stops vectorising
    const int64_t lines = by_columns ? v.cols : v.rows, len = by_columns ? v.rows : v.cols;
    const int64_t line_stride = by_columns ? v.col_stride : v.row_stride;
    auto contiguous = [&](auto *base) {
        using T = std::remove_const_t<std::remove_pointer_t<decltype(base)>>;
        const auto m = static_cast<T>(mask);
        const int s = shift;
        parallel_for(lines, threads, [&](int64_t i, int) {
            const T *src = base + i * line_stride;
            const T bits = m;
            const int by = s;
            uint8_t *line = dst + i * len;
            const int64_t n = len;
            for (int64_t j = 0; j < n; ++j) line[j] = static_cast<uint8_t>((src[j] & bits) >> by);
        });
    };
    if (v.col_stride == 1 || by_columns) {
        if (bytes)
            contiguous(static_cast<const uint8_t *>(v.data));
        else
            contiguous(static_cast<const uint16_t *>(v.data));
        return out;
    }
    with_codes(v, mask, [&](const auto &code) {
        parallel_for(v.rows, threads, [&](int64_t i, int) {
            uint8_t *row = dst + i * v.cols;
            for (int64_t j = 0; j < v.cols; ++j) row[j] = static_cast<uint8_t>(code(i, j) >> shift);
        });
    });
    return out;
}

// t[j] += d[j] 2^scale, wrapping like the kernels' int32 sums: an int32 C
// holds the total (the caller checked that it fits), whatever its parts are.
template <typename T, typename E>
void add_row(T *t, const E *d, int64_t n, int scale = 0) {
    using U = std::make_unsigned_t<T>;
    for (int64_t j = 0; j < n; ++j)
        t[j] = static_cast<T>(static_cast<U>(t[j]) + (static_cast<U>(d[j]) << scale));
}

// t[j] = d[j] 2^scale in place (the first error part)
template <typename T>
void scale_row(T *t, int64_t n, int scale) {
    using U = std::make_unsigned_t<T>;
    for (int64_t j = 0; j < n; ++j) t[j] = static_cast<T>(static_cast<U>(t[j]) << scale);
}

}  // namespace

bool exact_plus_table_gemm(const KernelTable &, const MatmulProblem &problem) {
    const Multiplier &m = *problem.multiplier;
    if (m.plan() != Plan::ExactPlusTable) return false;
    const int64_t rows = problem.rows, cols = problem.cols, inner = problem.inner;
    const int threads = threads_for(problem, rows);
    // the error parts first, into scratch: a failure there leaves C
    // untouched; int32 where their sums fit (half the memory to fault in and fold)
    const auto &parts = m.error_parts();
    int64_t bound = 0;
    for (const auto &part : parts) bound += part.table->max_abs_product() << part.scale;
    const size_t count = static_cast<size_t>(rows * cols);
    const bool error32 = bound <= std::numeric_limits<int32_t>::max() / std::max<int64_t>(inner, 1);
    const size_t words = error32 ? (count + 1) / 2 : count;
    const Scratch<int64_t> error(parts.empty() ? 0 : words);
    const Scratch<int64_t> more(parts.size() > 1 ? words : 0);  // each later part, then added
    for (size_t p = 0; p < parts.size(); ++p) {
        const Multiplier &error_model = *parts[p].table;
        const Digits a_digits = digits(problem.a, parts[p].a_mask, parts[p].a_shift, threads, error_model);
        const Digits b_digits = digits(problem.b, parts[p].b_mask, parts[p].b_shift, threads, error_model);
        MatmulProblem q = problem;
        q.multiplier = &error_model;
        q.a = a_digits.view;
        q.b = b_digits.view;
        q.c = MatrixView{problem.c.name, error32 ? APPROXMUL_INT32 : APPROXMUL_INT64,
                         p == 0 ? error.data() : more.data(), rows, cols, cols, 1};
        q.a_zero_point = q.b_zero_point = 0;
        q.b_pack_cache = nullptr;
        q.a_row_sums = q.b_col_sums = nullptr;
        matmul(q);
        const int scale = parts[p].scale;
        if (p == 0 && scale == 0) continue;
        parallel_for(rows, threads, [&](int64_t i, int) {
            auto fold = [&](auto *sums, const auto *part) {
                if (p == 0)
                    scale_row(sums + i * cols, cols, scale);
                else
                    add_row(sums + i * cols, part + i * cols, cols, scale);
            };
            if (error32)
                fold(reinterpret_cast<int32_t *>(error.data()),
                     reinterpret_cast<const int32_t *>(more.data()));
            else
                fold(error.data(), static_cast<const int64_t *>(more.data()));
        });
    }
    // then the exact part: a C with rows in memory order holds it (and the
    // total), else int64 scratch does
    const bool in_place = problem.c.col_stride == 1;
    const Scratch<int64_t> scratch(in_place ? 0 : count);
    const MatrixView total =
        in_place ? problem.c
                 : MatrixView{problem.c.name, APPROXMUL_INT64, scratch.data(), rows, cols, cols, 1};
    MatmulProblem e = problem;
    e.multiplier = m.exact_part().get();
    e.c = total;
    matmul(e);
    parallel_for(rows, threads, [&](int64_t i, int) {
        auto fold = [&](auto *t) {
            t += i * total.row_stride;
            if (!parts.empty() && error32)
                add_row(t, reinterpret_cast<const int32_t *>(error.data()) + i * cols, cols);
            else if (!parts.empty())
                add_row(t, error.data() + i * cols, cols);
            if (!in_place)
                for (int64_t j = 0; j < cols; ++j) store_value(problem.c, i, j, t[j]);
        };
        if (total.dtype == APPROXMUL_INT32)
            fold(static_cast<int32_t *>(const_cast<void *>(total.data)));
        else
            fold(static_cast<int64_t *>(const_cast<void *>(total.data)));
    });
    return true;
}

}  // namespace approxmul::kernels
