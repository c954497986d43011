// Pieces every GEMM driver shares: operand codes, the exact zero-point cross
// terms, and writing one output element in the output's type.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../core/operands.hpp"
#include "kernels.hpp"

namespace approxmul::kernels {

template <typename Out>
inline void store(const MatrixView &c, int64_t i, int64_t j, int64_t value) {
    static_cast<Out *>(const_cast<void *>(c.data))[i * c.row_stride + j * c.col_stride] =
        static_cast<Out>(value);
}

inline void store_value(const MatrixView &c, int64_t i, int64_t j, int64_t value) {
    if (c.dtype == APPROXMUL_INT32)
        store<int32_t>(c, i, j, value);
    else
        store<int64_t>(c, i, j, value);
}

// The sum of n bytes read as uint8 or int8: psadbw against zero where SSE2
// has it (16 bytes an instruction, where 8-wide int64 adds were an eighth of
// a batch-1 conv2d), signed bytes flipped to unsigned and the offset taken
// back.
inline int64_t byte_sum(const void *bytes, int64_t n, bool as_signed) {
    const auto *b = static_cast<const uint8_t *>(bytes);
    int64_t k = 0, total = 0;
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128(), flip = _mm_set1_epi8(as_signed ? -128 : 0);
    __m128i acc = zero;
    for (; k + 16 <= n; k += 16)
        acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_xor_si128(
                                      _mm_loadu_si128(reinterpret_cast<const __m128i *>(b + k)), flip),
                                  zero));
    total = _mm_cvtsi128_si64(acc) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc)) -
            (as_signed ? 128 * k : 0);
#endif
    for (; k < n; ++k) total += as_signed ? static_cast<int8_t>(b[k]) : b[k];
    return total;
}

// Sums of each row of a / column of b, for the exact zero-point cross terms.
// The loops run in memory order (the summed index outer when the other one
// has the shorter stride), so conv2d's column-major pixel views sum at
// vector speed instead of one strided load per element.
template <typename T>
inline void sum_lines(const T *data, int64_t n, int64_t len, int64_t n_stride, int64_t len_stride,
                      int64_t *sums) {
    if (std::llabs(n_stride) < std::llabs(len_stride)) {
        // int32 partial sums over up to 32767 lines (|element| <= 65535), so
        // the add vectorises 16 wide instead of 8 (conv2d's pixel views: 2x)
        constexpr int64_t kChunk = 32767;
        std::vector<int32_t> part(static_cast<size_t>(n));
        for (int64_t y0 = 0; y0 < len; y0 += kChunk) {
            std::fill(part.begin(), part.end(), 0);
            const int64_t y1 = std::min(len, y0 + kChunk);
            for (int64_t y = y0; y < y1; ++y) {
                const T *line = data + y * len_stride;
                int32_t *ps = part.data();
                if (n_stride == 1)
                    for (int64_t x = 0; x < n; ++x) ps[x] += line[x];
                else
                    for (int64_t x = 0; x < n; ++x) ps[x] += line[x * n_stride];
            }
            for (int64_t x = 0; x < n; ++x) sums[x] += part[static_cast<size_t>(x)];
        }
    } else {
        // contiguous bytes by byte_sum; wider codes in int32 partial sums
        // too (8-wide int64 adds: an eighth of a batch-1 conv2d's time)
        constexpr int64_t kChunk = 32767;
        for (int64_t x = 0; x < n; ++x) {
            const T *line = data + x * n_stride;
            if (sizeof(T) == 1 && len_stride == 1) {
                sums[x] = byte_sum(line, len, std::is_signed<T>::value);
                continue;
            }
            int64_t total = 0;
            for (int64_t y0 = 0; y0 < len; y0 += kChunk) {
                const int64_t y1 = std::min(len, y0 + kChunk);
                int32_t part = 0;
                if (len_stride == 1)
                    for (int64_t y = y0; y < y1; ++y) part += line[y];
                else
                    for (int64_t y = y0; y < y1; ++y) part += line[y * len_stride];
                total += part;
            }
            sums[x] = total;
        }
    }
}

inline std::vector<int64_t> operand_sums(const MatrixView &v, bool along_rows,
                                         int64_t zero_point) {
    if (zero_point == 0) return {};
    const int64_t n = along_rows ? v.rows : v.cols;
    const int64_t len = along_rows ? v.cols : v.rows;
    const int64_t ns = along_rows ? v.row_stride : v.col_stride;
    const int64_t ls = along_rows ? v.col_stride : v.row_stride;
    std::vector<int64_t> sums(static_cast<size_t>(n), 0);
    if (len == 0) return sums;  // an empty operand may be NULL: form no pointer into it
    switch (v.dtype) {
    case APPROXMUL_INT8: sum_lines(static_cast<const int8_t *>(v.data), n, len, ns, ls, sums.data()); break;
    case APPROXMUL_UINT8: sum_lines(static_cast<const uint8_t *>(v.data), n, len, ns, ls, sums.data()); break;
    case APPROXMUL_INT16: sum_lines(static_cast<const int16_t *>(v.data), n, len, ns, ls, sums.data()); break;
    case APPROXMUL_UINT16: sum_lines(static_cast<const uint16_t *>(v.data), n, len, ns, ls, sums.data()); break;
    default:
        for (int64_t x = 0; x < n; ++x)
            for (int64_t y = 0; y < len; ++y) sums[x] += along_rows ? load(v, x, y) : load(v, y, x);
    }
    return sums;
}

// The operand sums a cross term needs (none with a zero point of 0): the
// caller's, if it gave them, else summed here.
inline std::vector<int64_t> cross_sums(const MatrixView &v, bool along_rows, int64_t zero_point,
                                       const int64_t *given) {
    if (given == nullptr || zero_point == 0) return operand_sums(v, along_rows, zero_point);
    return std::vector<int64_t>(given, given + (along_rows ? v.rows : v.cols));
}

// The zero-point terms of one output: added to sum_k M(a, b).
struct CrossTerms {
    std::vector<int64_t> a_sums, b_sums;
    int64_t a_zero, b_zero, constant;
    explicit CrossTerms(const MatmulProblem &p)
        : a_sums(cross_sums(p.a, true, p.b_zero_point, p.a_row_sums)),
          b_sums(cross_sums(p.b, false, p.a_zero_point, p.b_col_sums)),
          a_zero(p.a_zero_point),
          b_zero(p.b_zero_point),
          constant(p.inner * p.a_zero_point * p.b_zero_point) {}
    // the row part: b_zero * sum_k a[i, k] (a_sums non-empty)
    int64_t row_cross(int64_t i) const { return b_zero * a_sums[static_cast<size_t>(i)]; }
    int64_t operator()(int64_t i, int64_t j) const {
        int64_t value = constant;
        if (!a_sums.empty()) value -= b_zero * a_sums[static_cast<size_t>(i)];
        if (!b_sums.empty()) value -= a_zero * b_sums[static_cast<size_t>(j)];
        return value;
    }
};

// c[i0 + i, j0 + j] = src[i * ld + j] + base (+ row_extra[i]) + cross(i0 + i,
// j0 + j) for a ni x nj block (c_scale nonzero: plus c_scale times c's old
// value): the cross terms are split into a row part and a column part
// (col_term, nj entries of scratch) so the inner loop is a plain
// vectorisable add and store.
template <typename Sum>
inline void store_block(const MatrixView &c, const CrossTerms &cross, int64_t base, int64_t i0,
                        int64_t j0, int64_t ni, int64_t nj, const Sum *src, int64_t ld,
                        std::vector<int64_t> &col_term, const int64_t *row_extra = nullptr,
                        int64_t c_scale = 0) {
    col_term.assign(static_cast<size_t>(nj), 0);
    if (!cross.b_sums.empty())
        for (int64_t j = 0; j < nj; ++j)
            col_term[static_cast<size_t>(j)] = -cross.a_zero * cross.b_sums[static_cast<size_t>(j0 + j)];
    auto emit = [&](auto *out) {
        using Out = std::remove_reference_t<decltype(*out)>;
        for (int64_t i = 0; i < ni; ++i) {
            int64_t row = base + cross.constant;
            if (!cross.a_sums.empty()) row -= cross.row_cross(i0 + i);
            if (row_extra != nullptr) row += row_extra[i];
            const Sum *from = src + i * ld;
            const int64_t *ct = col_term.data();
            Out *dst = out + (i0 + i) * c.row_stride + j0 * c.col_stride;
            if (c_scale != 0)
                for (int64_t j = 0; j < nj; ++j)
                    dst[j * c.col_stride] = static_cast<Out>(c_scale * static_cast<int64_t>(dst[j * c.col_stride]) +
                                                             row + ct[j] + static_cast<int64_t>(from[j]));
            else if (c.col_stride == 1)
                for (int64_t j = 0; j < nj; ++j)
                    dst[j] = static_cast<Out>(row + ct[j] + static_cast<int64_t>(from[j]));
            else
                for (int64_t j = 0; j < nj; ++j)
                    dst[j * c.col_stride] = static_cast<Out>(row + ct[j] + static_cast<int64_t>(from[j]));
        }
    };
    if (c.dtype == APPROXMUL_INT32)
        emit(static_cast<int32_t *>(const_cast<void *>(c.data)));
    else
        emit(static_cast<int64_t *>(const_cast<void *>(c.data)));
}

// Raw bit pattern (table index) of element (i, j) of a validated operand view.
template <typename T>
inline uint32_t code_at(const MatrixView &v, int64_t i, int64_t j, uint32_t mask) {
    return static_cast<uint32_t>(static_cast<const T *>(v.data)[i * v.row_stride + j * v.col_stride]) &
           mask;
}

// Calls f(code_loader) with a loader specialised for the view's storage type.
template <typename F>
inline void with_codes(const MatrixView &v, uint32_t mask, const F &f) {
    switch (v.dtype) {
    case APPROXMUL_INT8:
    case APPROXMUL_UINT8:
        return f([&](int64_t i, int64_t j) { return code_at<uint8_t>(v, i, j, mask); });
    default:
        return f([&](int64_t i, int64_t j) { return code_at<uint16_t>(v, i, j, mask); });
    }
}

}  // namespace approxmul::kernels
