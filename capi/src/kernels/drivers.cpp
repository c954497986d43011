#include "drivers.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "../core/error.hpp"
#include "../core/threads.hpp"
#include "common.hpp"

namespace approxmul::kernels {

int wanted_threads(const MatmulProblem &p) { return p.threads > 0 ? p.threads : num_threads(); }

int threads_for(const MatmulProblem &p, int64_t jobs) {
    if (p.rows * p.cols * std::max<int64_t>(p.inner, 1) < (int64_t{1} << 18)) return 1;
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted_threads(p), jobs)));
}

namespace {

MatrixView transposed(const MatrixView &v) {
    return MatrixView{v.name, v.dtype, v.data, v.cols, v.rows, v.col_stride, v.row_stride};
}

}  // namespace

MatmulProblem transposed_problem(const MatmulProblem &p) {
    MatmulProblem t = p;
    t.rows = p.cols;
    t.cols = p.rows;
    t.a = transposed(p.b);
    t.b = transposed(p.a);
    t.c = transposed(p.c);
    t.a_zero_point = p.b_zero_point;
    t.b_zero_point = p.a_zero_point;
    t.a_row_sums = p.b_col_sums;
    t.b_col_sums = p.a_row_sums;
    return t;
}

void pack_codes(const MatrixView &v, uint32_t mask, int64_t r0, int64_t nr, int64_t c0,
                int64_t nc, uint8_t *dst, int64_t ld) {
    const bool bytes = v.dtype == APPROXMUL_UINT8 || v.dtype == APPROXMUL_INT8;
    const auto byte_mask = static_cast<uint8_t>(mask);
    if (bytes && v.col_stride == 1) {
        const auto *base = static_cast<const uint8_t *>(v.data);
        for (int64_t r = 0; r < nr; ++r) {
            const uint8_t *src = base + (r0 + r) * v.row_stride + c0;
            uint8_t *row = dst + r * ld;
            if (byte_mask == 0xff) {
                std::memcpy(row, src, static_cast<size_t>(nc));
            } else {
                const uint8_t bits = byte_mask;  // a local: the byte stores may alias anything else
                for (int64_t c = 0; c < nc; ++c) row[c] = src[c] & bits;
            }
        }
        return;
    }
    if (bytes && v.row_stride == 1) {
        // a transposed byte matrix (the flipped problem's operand): 8x8 byte
        // blocks, each source column's 8 bytes read as one word and the
        // block transposed in registers (the per-element path below ran a
        // 256x2304x196 table GEMM a third slower)
        const auto *base = static_cast<const uint8_t *>(v.data) + r0 + c0 * v.col_stride;
        const int64_t nr8 = nr / 8 * 8, nc8 = nc / 8 * 8;
        const uint64_t words_mask = byte_mask * 0x0101010101010101ull;
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
                for (int t = 0; t < 8; ++t) {
                    x[t] &= words_mask;
                    std::memcpy(dst + (r + t) * ld + c, &x[t], 8);
                }
            }
        for (int64_t r = 0; r < nr; ++r)  // edges
            for (int64_t c = r < nr8 ? nc8 : 0; c < nc; ++c)
                dst[r * ld + c] = base[c * v.col_stride + r] & byte_mask;
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

}  // namespace approxmul::kernels
