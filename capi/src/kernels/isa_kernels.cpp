// The instruction-set specific kernels, written once. Meson compiles this
// file once per instruction set with that set's flags and
// APPROXMUL_KERNEL_ISA set to generic, avx2 or avx512; the preprocessor
// picks the vector type below from the flags, and the templates are the same
// for every set. Each compilation exports exactly one function, the
// registry entry <isa>_kernel_table(); everything else has internal
// linkage, and no C++ standard library template is instantiated here (see
// isa.hpp for why).
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>


#include "isa.hpp"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#ifndef APPROXMUL_KERNEL_ISA
#error "APPROXMUL_KERNEL_ISA must name the instruction set this file is compiled for"
#endif

namespace approxmul::kernels {

namespace {

// --------------------------------------------------------------- vectors
// A lane is one int32 accumulator holding the dot product of an int16 pair.

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
struct Vec {
    using T = __m512i;
    static constexpr int lanes = 16;
    static constexpr const char *kernel = "int16 pairs, vpdpwssd zmm (AVX-512 VNNI)";
    static constexpr int max_factorized_rank = 6;
    // the exact GEMM plus a nibble-table GEMM beats rank 3 to 5 (truncation
    // with cut 2 to 4: up to 4.5x faster on a Zen 4, at worst 4 % slower);
    // rank 2 (cut 1) is faster on one shape, slower on another
    static constexpr int nibble_error_min_rank = 3;
    static T zero() { return _mm512_setzero_si512(); }
    static T load(const void *p) { return _mm512_loadu_si512(p); }
    static T broadcast_pair(const int16_t *p) {
        int32_t x;
        std::memcpy(&x, p, 4);
        return _mm512_set1_epi32(x);
    }
    static T dot_pairs(T acc, T a, T b) { return _mm512_dpwssd_epi32(acc, a, b); }
    static T add(T a, T b) { return _mm512_add_epi32(a, b); }
    static void store(void *p, T v) { _mm512_storeu_si512(p, v); }
};
constexpr int kGemmRows = 8;
#elif defined(__AVX2__)
struct Vec {
    using T = __m256i;
    static constexpr int lanes = 8;
    static constexpr const char *kernel = "int16 pairs, vpmaddwd + vpaddd ymm (AVX2)";
    // a rank-2 sum ties with the table kernel on a Zen 3, rank 3 loses on
    // two of bench_gemm's three shapes (docs/benchmarks.md)
    static constexpr int max_factorized_rank = 2;
    // and the exact GEMM plus a nibble-table GEMM beats rank 2 (truncation
    // with cut 1: 0.63/0.62/0.47 against 0.54/0.51/0.43 of SGEMM there)
    static constexpr int nibble_error_min_rank = 2;
    static T zero() { return _mm256_setzero_si256(); }
    static T load(const void *p) { return _mm256_loadu_si256(static_cast<const T *>(p)); }
    static T broadcast_pair(const int16_t *p) {
        int32_t x;
        std::memcpy(&x, p, 4);
        return _mm256_set1_epi32(x);
    }
    // vpmaddwd: both int16 products summed into int32; the only wrap is
    // -32768 * -32768 * 2, and wrapping is what the driver expects.
    static T dot_pairs(T acc, T a, T b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
    static T add(T a, T b) { return _mm256_add_epi32(a, b); }
    static void store(void *p, T v) { _mm256_storeu_si256(static_cast<T *>(p), v); }
};
// 4 rows: 8 accumulators, 2 B vectors, the broadcast and a product fit the
// 16 ymm registers; with 6 GCC spilled accumulators to the stack every
// step (1.3-1.6x slower on a Zen 3)
constexpr int kGemmRows = 4;
#else
// Portable: a "vector" of 4 int32 lanes in plain C++, which compilers
// vectorise for whatever the target offers.
struct Vec {
    struct T {
        uint32_t v[4];
    };
    static constexpr int lanes = 4;
    static constexpr const char *kernel = "int16 pairs, portable C++";
    static constexpr int max_factorized_rank = 6;
    static constexpr int nibble_error_min_rank = max_factorized_rank + 1;  // no nibble kernel
    static T zero() { return T{{0, 0, 0, 0}}; }
    static T load(const void *p) {
        T t;
        std::memcpy(t.v, p, sizeof t.v);
        return t;
    }
    static T broadcast_pair(const int16_t *p) {
        uint32_t x;
        std::memcpy(&x, p, 4);
        return T{{x, x, x, x}};
    }
    static T dot_pairs(T acc, T a, T b) {
        for (int l = 0; l < 4; ++l) {
            const int32_t a0 = static_cast<int16_t>(a.v[l] & 0xffff);
            const int32_t a1 = static_cast<int16_t>(a.v[l] >> 16);
            const int32_t b0 = static_cast<int16_t>(b.v[l] & 0xffff);
            const int32_t b1 = static_cast<int16_t>(b.v[l] >> 16);
            // unsigned arithmetic: wraps modulo 2^32 like the vector instructions
            acc.v[l] += static_cast<uint32_t>(a0 * b0) + static_cast<uint32_t>(a1 * b1);
        }
        return acc;
    }
    static T add(T a, T b) {
        for (int l = 0; l < 4; ++l) a.v[l] += b.v[l];
        return a;
    }
    static void store(void *p, T v) { std::memcpy(p, v.v, sizeof v.v); }
};
constexpr int kGemmRows = 4;
#endif

constexpr int kGemmCols = 2 * Vec::lanes;

// ------------------------------------------------------- int16 GEMM
// kGemmRows x (2 vectors) accumulators stay in registers for the whole
// inner loop; A pairs are broadcast (folded into the instruction's memory
// operand on AVX-512), B pairs are loaded once per pair step.
void gemm_micro(int64_t kpairs, const int16_t *a, const int16_t *b, int32_t *c, int64_t ldc,
                int accumulate) {
    typename Vec::T acc[kGemmRows][2];
#pragma GCC unroll 16
    for (int r = 0; r < kGemmRows; ++r) acc[r][0] = acc[r][1] = Vec::zero();
    for (int64_t kp = 0; kp < kpairs; ++kp) {
        const int16_t *bp = b + kp * kGemmCols * 2;
        const auto b0 = Vec::load(bp), b1 = Vec::load(bp + 2 * Vec::lanes);
        const int16_t *ap = a + kp * kGemmRows * 2;
#pragma GCC unroll 16
        for (int r = 0; r < kGemmRows; ++r) {
            const auto x = Vec::broadcast_pair(ap + 2 * r);
            acc[r][0] = Vec::dot_pairs(acc[r][0], x, b0);
            acc[r][1] = Vec::dot_pairs(acc[r][1], x, b1);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < kGemmRows; ++r) {
        int32_t *row = c + r * ldc;
        if (accumulate) {
            acc[r][0] = Vec::add(acc[r][0], Vec::load(row));
            acc[r][1] = Vec::add(acc[r][1], Vec::load(row + Vec::lanes));
        }
        Vec::store(row, acc[r][0]);
        Vec::store(row + Vec::lanes, acc[r][1]);
    }
}

// One whole panel's pair step of byte codes widened to int16: out[2 j + h]
// = row h's code j (as int8 if is_signed), j < kGemmCols; s1 == nullptr
// gives zeros for h = 1. Byte interleave, then one widening per vector
// (GCC left the plain loop scalar: it could not rule out aliasing).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
void widen_pairs(const uint8_t *s0, const uint8_t *s1, int is_signed, int16_t *out) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s0));
    const __m256i b = s1 != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s1))
                                    : _mm256_setzero_si256();
    // unpack works within 128-bit lanes: reorder to columns 0-15 and 16-31
    const __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
    const __m256i cols[2] = {_mm256_permute2x128_si256(lo, hi, 0x20),
                             _mm256_permute2x128_si256(lo, hi, 0x31)};
    for (int h = 0; h < 2; ++h)
        _mm512_storeu_si512(out + 32 * h, is_signed ? _mm512_cvtepi8_epi16(cols[h])
                                                    : _mm512_cvtepu8_epi16(cols[h]));
}
#elif defined(__AVX2__)
void widen_pairs(const uint8_t *s0, const uint8_t *s1, int is_signed, int16_t *out) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s0));
    const __m128i b = s1 != nullptr ? _mm_loadu_si128(reinterpret_cast<const __m128i *>(s1))
                                    : _mm_setzero_si128();
    const __m128i cols[2] = {_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b)};
    for (int h = 0; h < 2; ++h)
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 16 * h),
                            is_signed ? _mm256_cvtepi8_epi16(cols[h]) : _mm256_cvtepu8_epi16(cols[h]));
}
#else
void widen_pairs(const uint8_t *s0, const uint8_t *s1, int is_signed, int16_t *out) {
    for (int j = 0; j < kGemmCols; ++j) {
        const uint8_t c0 = s0[j], c1 = s1 != nullptr ? s1[j] : uint8_t{0};
        out[2 * j] = is_signed ? static_cast<int8_t>(c0) : c0;
        out[2 * j + 1] = is_signed ? static_cast<int8_t>(c1) : c1;
    }
}
#endif

// isa.hpp states the layout. Table lookups stay scalar (no byte-indexed
// int16 gather is worth it here); the last panel is zero-padded.
void pair_pack(int64_t n, const uint8_t *const *rows, const int16_t *const *luts, int is_signed,
               int16_t *dst, int64_t panel_stride) {
    for (int64_t j0 = 0; j0 < n; j0 += kGemmCols) {
        int16_t *out = dst + j0 / kGemmCols * panel_stride;
        const int width = static_cast<int>(n - j0 < kGemmCols ? n - j0 : kGemmCols);
        const uint8_t *s0 = rows[0] + j0, *s1 = rows[1] != nullptr ? rows[1] + j0 : nullptr;
        if (luts == nullptr && width == kGemmCols) {
            widen_pairs(s0, s1, is_signed, out);
        } else if (luts == nullptr) {
            uint8_t a[kGemmCols] = {}, b[kGemmCols] = {};  // zero codes widen to zeros
            std::memcpy(a, s0, static_cast<size_t>(width));
            if (s1 != nullptr) std::memcpy(b, s1, static_cast<size_t>(width));
            widen_pairs(a, s1 != nullptr ? b : nullptr, is_signed, out);
        } else if (width == kGemmCols && s1 != nullptr) {
            const int16_t *l0 = luts[0], *l1 = luts[1];
            for (int j = 0; j < kGemmCols; ++j) {
                out[2 * j] = l0[s0[j]];
                out[2 * j + 1] = l1[s1[j]];
            }
        } else {
            for (int j = 0; j < kGemmCols; ++j) {
                out[2 * j] = j < width ? luts[0][s0[j]] : int16_t{0};
                out[2 * j + 1] = j < width && s1 != nullptr ? luts[1][s1[j]] : int16_t{0};
            }
        }
    }
}

// isa.hpp states the layout: 4x4 transposes of 32-bit pairs, 8 inner pairs
// per step (AVX2's 4-row panels); element by element elsewhere and for the tail.
#if defined(__AVX2__) && !defined(__AVX512F__)
inline __m256i widen_half(__m128i bytes, int is_signed) {
    return is_signed ? _mm256_cvtepi8_epi16(bytes) : _mm256_cvtepu8_epi16(bytes);
}
#endif

void pair_rows(int64_t kpairs, const uint8_t *const *rows, int is_signed, int16_t *dst) {
    int64_t kp = 0;
#if defined(__AVX2__) && !defined(__AVX512F__)
    static_assert(kGemmRows == 4, "the transpose below is of 4 rows");
    for (; kp + 8 <= kpairs; kp += 8) {
        __m256i r[4];  // row i's pairs kp..kp+7 as int16 pairs (32-bit units)
        for (int i = 0; i < 4; ++i)
            r[i] = widen_half(_mm_loadu_si128(reinterpret_cast<const __m128i *>(rows[i] + 2 * kp)),
                              is_signed);
        // units (row, pair): lane 0 holds pairs 0-3, lane 1 pairs 4-7
        const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpacklo_epi32(r[2], r[3]);
        const __m256i t2 = _mm256_unpackhi_epi32(r[0], r[1]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
        const __m256i p0 = _mm256_unpacklo_epi64(t0, t1), p1 = _mm256_unpackhi_epi64(t0, t1);
        const __m256i p2 = _mm256_unpacklo_epi64(t2, t3), p3 = _mm256_unpackhi_epi64(t2, t3);
        // p0: pairs 0 | 4, p1: 1 | 5, p2: 2 | 6, p3: 3 | 7, each the 4 rows' units
        auto *out = reinterpret_cast<__m256i *>(dst + kp * 8);
        _mm256_storeu_si256(out, _mm256_permute2x128_si256(p0, p1, 0x20));
        _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(p2, p3, 0x20));
        _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(p0, p1, 0x31));
        _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(p2, p3, 0x31));
    }
#endif
    for (; kp < kpairs; ++kp)
        for (int i = 0; i < kGemmRows; ++i)
            for (int h = 0; h < 2; ++h) {
                const uint8_t code = rows[i][2 * kp + h];
                dst[(kp * kGemmRows + i) * 2 + h] = is_signed ? static_cast<int8_t>(code) : code;
            }
}

// ------------------------------------------------------- table kernel

#if defined(__AVX512VBMI__) && defined(__AVX512BW__)
constexpr const char *kTableKernel =
    "byte planes in zmm registers, vpermi2b lookups (AVX-512 VBMI), 16-bit sums";
constexpr int kTableMaxChunks = 4;  // 64-column chunks per call: up to 16 accumulators

// GCC 12 warns that its own intrinsics' _mm512_undefined_* placeholders are
// uninitialized when widening/extracting intrinsics are inlined (a false
// positive of the header, not of this code).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Adds the 16-bit byte-plane sums of one 64-column chunk into acc[0..63] as
// 32-bit column totals. words_lo: the low plane's whole words summed (word
// w: column 2w in its low byte, 2w + 1 in its high byte), odd_lo: the odd
// columns' low-plane bytes alone; words_hi/odd_hi the same for the high
// plane. Modulo 2^16 the words' sum is even + 256 odd, and the even
// columns' sum (at most 256 steps of 255) fits 16 bits, so it is
// words - (odd << 8). A column's total is low + 256 * high.
inline void widen_chunk(__m512i words_lo, __m512i odd_lo, __m512i words_hi, __m512i odd_hi,
                        uint32_t *acc) {
    const __m512i even_lo = _mm512_sub_epi16(words_lo, _mm512_slli_epi16(odd_lo, 8));
    const __m512i even_hi = _mm512_sub_epi16(words_hi, _mm512_slli_epi16(odd_hi, 8));
    // columns 2w (w < 32) and 2w + 1 as 32-bit values, words 0-15 then 16-31
    __m512i even[2], odd[2];
    for (int h = 0; h < 2; ++h) {
        const __m256i el = h ? _mm512_extracti64x4_epi64(even_lo, 1) : _mm512_castsi512_si256(even_lo);
        const __m256i eh = h ? _mm512_extracti64x4_epi64(even_hi, 1) : _mm512_castsi512_si256(even_hi);
        const __m256i ol = h ? _mm512_extracti64x4_epi64(odd_lo, 1) : _mm512_castsi512_si256(odd_lo);
        const __m256i oh = h ? _mm512_extracti64x4_epi64(odd_hi, 1) : _mm512_castsi512_si256(odd_hi);
        even[h] = _mm512_add_epi32(_mm512_cvtepu16_epi32(el),
                                   _mm512_slli_epi32(_mm512_cvtepu16_epi32(eh), 8));
        odd[h] = _mm512_add_epi32(_mm512_cvtepu16_epi32(ol),
                                  _mm512_slli_epi32(_mm512_cvtepu16_epi32(oh), 8));
    }
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                             15, 31);
    for (int h = 0; h < 2; ++h) {
        uint32_t *dst = acc + 32 * h;
        const __m512i a = _mm512_permutex2var_epi32(even[h], first, odd[h]);
        const __m512i b = _mm512_permutex2var_epi32(even[h], second, odd[h]);
        _mm512_storeu_si512(dst, _mm512_add_epi32(_mm512_loadu_si512(dst), a));
        _mm512_storeu_si512(dst + 16, _mm512_add_epi32(_mm512_loadu_si512(dst + 16), b));
    }
}

// A 256-entry byte lookup from the table's four 64-byte quarters q0-q3:
// vpermi2b looks the codes with the top bit set (`upper`) up in q2:q3 and
// leaves the others' codes in place, then looks those (`lower`) up in
// q0:q1. Merge masks instead of two full lookups and a blend: one vector
// operation fewer per 64 codes, the two masks shared by every table the
// same codes index.
inline __m512i lookup_bytes(__m512i idx, __mmask64 upper, __mmask64 lower, __m512i q0,
                            __m512i q1, __m512i q2, __m512i q3) {
    return _mm512_mask2_permutex2var_epi8(q0, _mm512_mask2_permutex2var_epi8(q2, idx, upper, q3),
                                          lower, q1);
}

// The stationary code's 256 products sit in 8 registers (4 per byte plane);
// vpermi2b looks 64 streamed codes up in them (lookup_bytes). One load of
// the 8 registers serves Chunks streamed vectors. Each plane adds into two
// 16-bit sums, its whole words and its odd bytes (widen_chunk recovers the
// even bytes' sum): one operation fewer per plane than masking out the
// even bytes. The shifts that bring the odd bytes down share a port with
// the permutes on Zen 4 and bound the step there (docs/benchmarks.md).
template <int Chunks>
void table_chunks(int64_t inner, const uint8_t *s, const uint8_t *x, int64_t x_stride,
                  const uint8_t *planes, uint32_t *acc32) {
    __m512i acc[Chunks][4];
    for (auto &chunk : acc)
        for (auto &v : chunk) v = _mm512_setzero_si512();
    for (int64_t k = 0; k < inner; ++k) {
        const uint8_t *t = planes + static_cast<uint32_t>(s[k]) * 512;
        const __m512i l0 = _mm512_loadu_si512(t), l1 = _mm512_loadu_si512(t + 64);
        const __m512i l2 = _mm512_loadu_si512(t + 128), l3 = _mm512_loadu_si512(t + 192);
        const __m512i h0 = _mm512_loadu_si512(t + 256), h1 = _mm512_loadu_si512(t + 320);
        const __m512i h2 = _mm512_loadu_si512(t + 384), h3 = _mm512_loadu_si512(t + 448);
        const uint8_t *xk = x + k * x_stride;
#pragma GCC unroll 4
        for (int c = 0; c < Chunks; ++c) {
            const __m512i idx = _mm512_loadu_si512(xk + 64 * c);
            const __mmask64 upper = _mm512_movepi8_mask(idx), lower = _knot_mask64(upper);
            const __m512i lo = lookup_bytes(idx, upper, lower, l0, l1, l2, l3);
            const __m512i hi = lookup_bytes(idx, upper, lower, h0, h1, h2, h3);
            acc[c][0] = _mm512_add_epi16(acc[c][0], lo);
            acc[c][1] = _mm512_add_epi16(acc[c][1], _mm512_srli_epi16(lo, 8));
            acc[c][2] = _mm512_add_epi16(acc[c][2], hi);
            acc[c][3] = _mm512_add_epi16(acc[c][3], _mm512_srli_epi16(hi, 8));
        }
    }
    for (int c = 0; c < Chunks; ++c)
        widen_chunk(acc[c][0], acc[c][1], acc[c][2], acc[c][3], acc32 + 64 * c);
}

void table_block(int64_t inner, const uint8_t *s, const uint8_t *x, int64_t x_stride,
                 int64_t width, const uint8_t *planes, const uint16_t *, uint32_t *acc) {
    for (int64_t j = 0; j < width;) {
        const int64_t left = (width - j) / 64;
        const uint8_t *xj = x + j;
        if (left >= 4) {
            table_chunks<4>(inner, s, xj, x_stride, planes, acc + j);
            j += 256;
        } else if (left == 3) {
            table_chunks<3>(inner, s, xj, x_stride, planes, acc + j);
            j += 192;
        } else if (left == 2) {
            table_chunks<2>(inner, s, xj, x_stride, planes, acc + j);
            j += 128;
        } else {
            table_chunks<1>(inner, s, xj, x_stride, planes, acc + j);
            j += 64;
        }
    }
}
#pragma GCC diagnostic pop
#else
constexpr const char *kTableKernel =
    "uint16 products, scalar lookups with register accumulators (weight-stationary)";
constexpr int kTableMaxChunks = 4;

// Without byte permutes over 128 entries, one lookup per product. Four
// stationary codes' 512-byte product columns are fetched once (L1) and
// every streamed column adds its four products into its sum at once; the
// streamed codes are read 8 at a time. (Looping k innermost instead touches
// a new column, mostly from L2, every few products: 3x slower.)
void table_block(int64_t inner, const uint8_t *s, const uint8_t *x, int64_t x_stride,
                 int64_t width, const uint8_t *, const uint16_t *wide, uint32_t *acc) {
    int64_t k = 0;
    for (; k + 4 <= inner; k += 4) {
        const uint16_t *c0 = wide + static_cast<uint32_t>(s[k]) * 256;
        const uint16_t *c1 = wide + static_cast<uint32_t>(s[k + 1]) * 256;
        const uint16_t *c2 = wide + static_cast<uint32_t>(s[k + 2]) * 256;
        const uint16_t *c3 = wide + static_cast<uint32_t>(s[k + 3]) * 256;
        const uint8_t *x0 = x + k * x_stride, *x1 = x0 + x_stride, *x2 = x1 + x_stride,
                      *x3 = x2 + x_stride;
        for (int64_t j = 0; j < width; j += 8) {
            uint64_t q0, q1, q2, q3;
            std::memcpy(&q0, x0 + j, 8);
            std::memcpy(&q1, x1 + j, 8);
            std::memcpy(&q2, x2 + j, 8);
            std::memcpy(&q3, x3 + j, 8);
#pragma GCC unroll 8
            for (int t = 0; t < 8; ++t)
                acc[j + t] += uint32_t{c0[(q0 >> (8 * t)) & 0xff]} + c1[(q1 >> (8 * t)) & 0xff] +
                              c2[(q2 >> (8 * t)) & 0xff] + c3[(q3 >> (8 * t)) & 0xff];
        }
    }
    for (; k < inner; ++k) {
        const uint16_t *col = wide + static_cast<uint32_t>(s[k]) * 256;
        const uint8_t *xk = x + k * x_stride;
        for (int64_t j = 0; j < width; ++j) acc[j] += col[xk[j]];
    }
}
#endif


// ------------------------------------------------------- nibble tables
// Models of up to 4 bits (and the low-nibble error of exact-plus-table
// models): a stationary code's 16 products are one 16-byte row, and vpshufb
// looks a vector of streamed codes up in it per instruction (each 128-bit
// lane reads the row broadcast into it). Byte sums run `group` steps, then
// go into 16-bit sums, even and odd columns apart (mask and shift, no
// shuffle port). One loop for both widths (NibbleLanes): on avx512, 64
// lookups per instruction and the 16-bit sums in 8 of the 32 registers
// (the ymm loop there ran at about half the shuffle port's bound, its sums
// loaded and stored every few steps); on avx2 the compiler keeps the 16
// ymm sums in L1, as the loop did by hand before.
#if defined(__AVX512BW__)
struct NibbleLanes {
    using Vec = __m512i;
    static constexpr int rows = 2, chunks = 2, width = 64;  // 2 x 2 byte accumulators
    static Vec zero() { return _mm512_setzero_si512(); }
    static Vec row(const uint8_t *p) {
        return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    }
    static Vec load(const uint8_t *p) { return _mm512_loadu_si512(p); }
    static Vec lookup(Vec row, Vec codes) { return _mm512_shuffle_epi8(row, codes); }
    static Vec add8(Vec a, Vec b) { return _mm512_add_epi8(a, b); }
    static Vec add16(Vec a, Vec b) { return _mm512_add_epi16(a, b); }
    static Vec even(Vec v) { return _mm512_and_si512(v, _mm512_set1_epi16(0x00ff)); }
    static Vec odd(Vec v) { return _mm512_srli_epi16(v, 8); }
    static void store(uint16_t *p, Vec v) { _mm512_storeu_si512(p, v); }
};
constexpr const char *kNibbleKernel =
    "16-byte product rows, vpshufb zmm lookups, byte sums widened every few steps in registers";
#elif defined(__AVX2__)
struct NibbleLanes {
    using Vec = __m256i;
    static constexpr int rows = 2, chunks = 4, width = 32;  // 2 x 4 byte accumulators
    static Vec zero() { return _mm256_setzero_si256(); }
    static Vec row(const uint8_t *p) {
        return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    }
    static Vec load(const uint8_t *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
    static Vec lookup(Vec row, Vec codes) { return _mm256_shuffle_epi8(row, codes); }
    static Vec add8(Vec a, Vec b) { return _mm256_add_epi8(a, b); }
    static Vec add16(Vec a, Vec b) { return _mm256_add_epi16(a, b); }
    static Vec even(Vec v) { return _mm256_and_si256(v, _mm256_set1_epi16(0x00ff)); }
    static Vec odd(Vec v) { return _mm256_srli_epi16(v, 8); }
    static void store(uint16_t *p, Vec v) { _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), v); }
};
constexpr const char *kNibbleKernel =
    "16-byte product rows, vpshufb ymm lookups, byte sums widened every few steps";
#endif

#if defined(__AVX2__)  // the AVX-512 set defines it too: either lanes above
constexpr int kNibbleRows = NibbleLanes::rows;
constexpr int kNibbleCols = NibbleLanes::chunks * NibbleLanes::width;

#pragma GCC diagnostic push  // the header false positive noted at the table kernel
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
void nibble_block(int64_t inner, const uint8_t *s, int64_t s_stride, const uint8_t *x,
                  const uint8_t *table, int group, uint32_t *acc, int64_t acc_stride) {
    using L = NibbleLanes;
    using Vec = L::Vec;
    constexpr int R = L::rows, C = L::chunks, V = L::width;
    Vec even[R][C], odd[R][C];  // 16-bit sums of the even and odd columns
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) even[r][c] = odd[r][c] = L::zero();
    for (int64_t k0 = 0; k0 < inner; k0 += group) {
        const int64_t k1 = k0 + group < inner ? k0 + group : inner;
        Vec bytes[R][C];
        for (auto &row : bytes)
            for (auto &v : row) v = L::zero();
        for (int64_t k = k0; k < k1; ++k) {
            Vec rows[R];
            for (int r = 0; r < R; ++r) rows[r] = L::row(table + 16 * size_t{s[r * s_stride + k]});
#pragma GCC unroll 4
            for (int c = 0; c < C; ++c) {
                const Vec codes = L::load(x + k * kNibbleCols + V * c);
                for (int r = 0; r < R; ++r) bytes[r][c] = L::add8(bytes[r][c], L::lookup(rows[r], codes));
            }
        }
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) {
                even[r][c] = L::add16(even[r][c], L::even(bytes[r][c]));
                odd[r][c] = L::add16(odd[r][c], L::odd(bytes[r][c]));
            }
    }
    uint16_t e[V / 2], o[V / 2];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
            L::store(e, even[r][c]);
            L::store(o, odd[r][c]);
            uint32_t *row = acc + r * acc_stride + V * c;
            for (int w = 0; w < V / 2; ++w) {
                row[2 * w] += e[w];
                row[2 * w + 1] += o[w];
            }
        }
}
#pragma GCC diagnostic pop
constexpr auto kNibbleBlock = nibble_block;
#else
constexpr const char *kNibbleKernel = nullptr;
constexpr int kNibbleRows = 0, kNibbleCols = 0;
constexpr void (*kNibbleBlock)(int64_t, const uint8_t *, int64_t, const uint8_t *,
                               const uint8_t *, int, uint32_t *, int64_t) = nullptr;
#endif

// ------------------------------------------------------- product-table order
// For kPtRows (16) stationary codes s_i and kPtSteps (16) inner steps at a time,
// the products P[kk][v][i] = wide[s_i(kk) * 256 + v] (uint16) are laid out
// contiguous over i (8x8 16-bit transposes); every streamed column j then
// adds the row P[kk][x_j(kk)]: one 256-bit load, split into even and odd
// rows by a mask and a shift (no shuffle port), two 32-bit adds per 16
// products, no lookups. Worth it when the streamed dimension amortises the
// 256 x 16 x inner precompute.
#if defined(__AVX2__)
constexpr int kPtRows = 16;
constexpr int kPtSteps = 16;  // inner steps per precomputed block (128 KiB of P)
constexpr int kPtCols = 4;   // streamed columns per pass (2 accumulators each)
// Streamed length from which the driver prefers this order: AVX2's scalar
// weight-stationary kernel runs about 4 G/s and this order passes it from a
// streamed length of about 24 (Zen 5). On AVX-512 VBMI the register kernel
// is faster on every shape measured (a zmm variant of this order, 32 rows,
// reached 12-32 G/s against 26-46): there it runs only when forced.
#if defined(__AVX512VBMI__)
constexpr int64_t kPtMinStream = int64_t{1} << 62;
#else
constexpr int64_t kPtMinStream = 32;
#endif
constexpr const char *kPtKernel =
    "product-table order: 16 stationary codes x 8 inner steps of uint16 products "
    "transposed into rows, vpaddd chains over the streamed codes (AVX2)";

// In each 128-bit lane: r[t] = 8 uint16 of row t -> r[v] = row v's 8 values
// of column v (per lane).
inline void pt_transpose8x16(__m256i r[8]) {
    const __m256i t0 = _mm256_unpacklo_epi16(r[0], r[1]), t1 = _mm256_unpackhi_epi16(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi16(r[2], r[3]), t3 = _mm256_unpackhi_epi16(r[2], r[3]);
    const __m256i t4 = _mm256_unpacklo_epi16(r[4], r[5]), t5 = _mm256_unpackhi_epi16(r[4], r[5]);
    const __m256i t6 = _mm256_unpacklo_epi16(r[6], r[7]), t7 = _mm256_unpackhi_epi16(r[6], r[7]);
    const __m256i u0 = _mm256_unpacklo_epi32(t0, t2), u1 = _mm256_unpackhi_epi32(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi32(t1, t3), u3 = _mm256_unpackhi_epi32(t1, t3);
    const __m256i u4 = _mm256_unpacklo_epi32(t4, t6), u5 = _mm256_unpackhi_epi32(t4, t6);
    const __m256i u6 = _mm256_unpacklo_epi32(t5, t7), u7 = _mm256_unpackhi_epi32(t5, t7);
    r[0] = _mm256_unpacklo_epi64(u0, u4);
    r[1] = _mm256_unpackhi_epi64(u0, u4);
    r[2] = _mm256_unpacklo_epi64(u1, u5);
    r[3] = _mm256_unpackhi_epi64(u1, u5);
    r[4] = _mm256_unpacklo_epi64(u2, u6);
    r[5] = _mm256_unpackhi_epi64(u2, u6);
    r[6] = _mm256_unpacklo_epi64(u3, u7);
    r[7] = _mm256_unpackhi_epi64(u3, u7);
}

// Adds the products of Q streamed columns j.. over kb precomputed steps.
template <int Q>
inline void pt_columns(int kb, const uint16_t *work, const uint8_t *const *xk, int64_t j,
                       uint32_t *acc) {
    const __m256i low16 = _mm256_set1_epi32(0xffff);
    __m256i even[Q], odd[Q];
#pragma GCC unroll 8
    for (int q = 0; q < Q; ++q) even[q] = odd[q] = _mm256_setzero_si256();
    for (int kk = 0; kk < kb; ++kk) {
        const uint16_t *p = work + static_cast<int64_t>(kk) * 256 * kPtRows;
        const uint8_t *xs = xk[kk] + j;
#pragma GCC unroll 8
        for (int q = 0; q < Q; ++q) {
            const __m256i v = _mm256_loadu_si256(
                reinterpret_cast<const __m256i *>(p + static_cast<uint32_t>(xs[q]) * kPtRows));
            even[q] = _mm256_add_epi32(even[q], _mm256_and_si256(v, low16));
            odd[q] = _mm256_add_epi32(odd[q], _mm256_srli_epi32(v, 16));
        }
    }
#pragma GCC unroll 8
    for (int q = 0; q < Q; ++q) {
        // even: rows 0,2,..,14; odd: 1,3,..,15 -> rows 0-3|8-11 and 4-7|12-15
        const __m256i a = _mm256_unpacklo_epi32(even[q], odd[q]);
        const __m256i b = _mm256_unpackhi_epi32(even[q], odd[q]);
        uint32_t *c = acc + (j + q) * kPtRows;
        __m256i *c0 = reinterpret_cast<__m256i *>(c), *c1 = reinterpret_cast<__m256i *>(c + 8);
        _mm256_storeu_si256(c0, _mm256_add_epi32(_mm256_loadu_si256(c0),
                                                 _mm256_permute2x128_si256(a, b, 0x20)));
        _mm256_storeu_si256(c1, _mm256_add_epi32(_mm256_loadu_si256(c1),
                                                 _mm256_permute2x128_si256(a, b, 0x31)));
    }
}

// s[i * s_stride + k] (i < kPtRows, k < inner): stationary codes;
// x[k * x_stride + j] (j < ncols): streamed codes; acc[j * kPtRows + i] +=
// sum_k wide[s * 256 + x] modulo 2^32; work: 256 * kPtRows * kPtSteps
// uint32 (used as uint16).
void pt_block(int64_t inner, const uint8_t *s, int64_t s_stride, const uint8_t *x,
              int64_t x_stride, int64_t ncols, const uint16_t *wide, uint32_t *acc,
              uint32_t *work32) {
    uint16_t *work = reinterpret_cast<uint16_t *>(work32);
    for (int64_t k0 = 0; k0 < inner; k0 += kPtSteps) {
        const int kb = static_cast<int>(inner - k0 < kPtSteps ? inner - k0 : kPtSteps);
        for (int kk = 0; kk < kb; ++kk) {
            const uint16_t *col[16];
            for (int t = 0; t < 16; ++t)
                col[t] = wide + static_cast<uint32_t>(s[t * s_stride + k0 + kk]) * 256;
            uint16_t *dst = work + static_cast<int64_t>(kk) * 256 * kPtRows;
            for (int v0 = 0; v0 < 256; v0 += 16) {
                __m256i lo[8], hi[8];  // rows 0-7 and 8-15, values v0..v0+15
#pragma GCC unroll 8
                for (int t = 0; t < 8; ++t) {
                    lo[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(col[t] + v0));
                    hi[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(col[t + 8] + v0));
                }
                pt_transpose8x16(lo);
                pt_transpose8x16(hi);
#pragma GCC unroll 8
                for (int t = 0; t < 8; ++t) {
                    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + (v0 + t) * kPtRows),
                                        _mm256_permute2x128_si256(lo[t], hi[t], 0x20));
                    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + (v0 + 8 + t) * kPtRows),
                                        _mm256_permute2x128_si256(lo[t], hi[t], 0x31));
                }
            }
        }
        const uint8_t *xk[kPtSteps];
        for (int kk = 0; kk < kb; ++kk) xk[kk] = x + (k0 + kk) * x_stride;
        int64_t j = 0;
        for (; j + kPtCols <= ncols; j += kPtCols) pt_columns<kPtCols>(kb, work, xk, j, acc);
        for (; j < ncols; ++j) pt_columns<1>(kb, work, xk, j, acc);
    }
}
constexpr auto kPtBlock = pt_block;
#else
constexpr int kPtRows = 0, kPtSteps = 0;
constexpr int64_t kPtMinStream = 0;
constexpr const char *kPtKernel = nullptr;
constexpr void (*kPtBlock)(int64_t, const uint8_t *, int64_t, const uint8_t *, int64_t, int64_t,
                           const uint16_t *, uint32_t *, uint32_t *) = nullptr;
#endif


// ------------------------------------------------------- u8 x s8 GEMM
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && \
    defined(__AVX512VBMI__)
#pragma GCC diagnostic push  // the same header false positive as above
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
// AMX: one step multiplies a 16-row tile of A (64 bytes of each row) by a
// 16-quad tile of B (16 columns x 4 bytes per row, B's packed panel as it
// is) into 16 x 16 int32, 16384 byte products per instruction against
// vpdpbusd's 64. Tiles: 0, 1 C (columns 0-15, 16-31); 2 A; 3, 4 B.
constexpr int kU8Rows = 16, kU8Cols = 32, kU8TileQuads = 16;
// Factorizations whose factors fit bytes run on the tiles: truncation's
// (rank 2 to 5, cut 1 to 4) beat the exact GEMM plus a nibble-table GEMM on
// all three bench_gemm shapes on an Emerald Rapids (1.04-5.27x float32
// against 0.70-1.17x, bench_factorized.py, docs/benchmarks.md)
constexpr int kU8NibbleErrorMinRank = Vec::max_factorized_rank + 1;
constexpr const char *kU8Kernel = "AMX tiles (tdpbusd), 16 x 32 int32 per 64-byte step";

struct alignas(64) TileConfig {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

constexpr TileConfig tile_config() {
    TileConfig config{};
    config.palette = 1;
    for (int t = 0; t < 5; ++t) config.rows[t] = 16, config.colsb[t] = 64;
    return config;
}
// static: GCC 12 drops stores into a local that only ldtilecfg reads
constexpr TileConfig kTileConfig = tile_config();

void u8_tiles(int begin) {
    if (begin)
        _tile_loadconfig(&kTileConfig);
    else
        _tile_release();
}

void u8_micro(int64_t kquads, const uint8_t *a, const uint8_t *b, int32_t *c, int64_t ldc,
              int accumulate, int a_signed) {
    const int64_t steps = (kquads + kU8TileQuads - 1) / kU8TileQuads;
    const int64_t a_stride = steps * 64, b_stride = kU8Cols * 4, c_stride = ldc * 4;
    if (accumulate) {
        _tile_loadd(0, c, c_stride);
        _tile_loadd(1, c + 16, c_stride);
    } else {
        _tile_zero(0);
        _tile_zero(1);
    }
    for (int64_t step = 0; step < steps; ++step) {
        const uint8_t *bs = b + step * kU8TileQuads * b_stride;
        _tile_loadd(2, a + step * 64, a_stride);
        _tile_loadd(3, bs, b_stride);
        _tile_loadd(4, bs + 64, b_stride);
        if (a_signed) {  // the first multiplicand is A's, signed here
            _tile_dpbsud(0, 2, 3);
            _tile_dpbsud(1, 2, 4);
        } else {
            _tile_dpbusd(0, 2, 3);
            _tile_dpbusd(1, 2, 4);
        }
    }
    _tile_stored(0, c, c_stride);
    _tile_stored(1, c + 16, c_stride);
}
constexpr auto kU8Tiles = u8_tiles;
#else
constexpr int kU8Rows = 8, kU8Cols = 32, kU8TileQuads = 0;
constexpr int kU8NibbleErrorMinRank = Vec::nibble_error_min_rank;
constexpr const char *kU8Kernel = "vpdpbusd zmm (AVX-512 VNNI), 8 x 32 int32 per quad";
constexpr void (*kU8Tiles)(int) = nullptr;

// kU8Rows x 2 zmm accumulators; the A quad of each row is broadcast, B's
// two vectors hold 16 columns x 4 inner steps each. vpdpbusd's first
// multiplicand is the unsigned one.
template <bool ASigned>
void u8_micro_t(int64_t kquads, const uint8_t *a, const uint8_t *b, int32_t *c, int64_t ldc,
                int accumulate) {
    __m512i acc[kU8Rows][2];
#pragma GCC unroll 16
    for (int r = 0; r < kU8Rows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    for (int64_t kq = 0; kq < kquads; ++kq) {
        const __m512i b0 = _mm512_loadu_si512(b + kq * kU8Cols * 4);
        const __m512i b1 = _mm512_loadu_si512(b + kq * kU8Cols * 4 + 64);
        const uint8_t *ap = a + kq * kU8Rows * 4;
#pragma GCC unroll 16
        for (int r = 0; r < kU8Rows; ++r) {
            int32_t q;
            std::memcpy(&q, ap + 4 * r, 4);
            const __m512i x = _mm512_set1_epi32(q);
            if (ASigned) {
                acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], b0, x);
                acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], b1, x);
            } else {
                acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], x, b0);
                acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], x, b1);
            }
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < kU8Rows; ++r) {
        int32_t *row = c + r * ldc;
        if (accumulate) {
            acc[r][0] = _mm512_add_epi32(acc[r][0], _mm512_loadu_si512(row));
            acc[r][1] = _mm512_add_epi32(acc[r][1], _mm512_loadu_si512(row + 16));
        }
        _mm512_storeu_si512(row, acc[r][0]);
        _mm512_storeu_si512(row + 16, acc[r][1]);
    }
}

void u8_micro(int64_t kquads, const uint8_t *a, const uint8_t *b, int32_t *c, int64_t ldc,
              int accumulate, int a_signed) {
    if (a_signed)
        u8_micro_t<true>(kquads, a, b, c, ldc, accumulate);
    else
        u8_micro_t<false>(kquads, a, b, c, ldc, accumulate);
}
#endif

// A 256-entry byte table in 4 registers (lookup_bytes).
struct ByteLut {
    __m512i t0, t1, t2, t3;
    explicit ByteLut(const uint8_t *lut)
        : t0(_mm512_loadu_si512(lut)),
          t1(_mm512_loadu_si512(lut + 64)),
          t2(_mm512_loadu_si512(lut + 128)),
          t3(_mm512_loadu_si512(lut + 192)) {}
    __m512i operator()(__m512i idx) const {
        const __mmask64 upper = _mm512_movepi8_mask(idx);
        return lookup_bytes(idx, upper, _knot_mask64(upper), t0, t1, t2, t3);
    }
};

void u8_lut(int64_t n, const uint8_t *src, const uint8_t *lut, uint8_t *dst) {
    const ByteLut table(lut);
    for (int64_t j = 0; j < n; j += 64) {
        const __mmask64 m = n - j >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - j)) - 1;
        _mm512_mask_storeu_epi8(dst + j, m, table(_mm512_maskz_loadu_epi8(m, src + j)));
    }
}

// Exact codes' bytes, as they are or moved by 128: one XOR, where a lookup
// costs two vpermi2b (each 2 cycles of the one shuffle port on Intel cores).
struct XorBytes {
    __m512i flip;
    __m512i operator()(__m512i x) const { return _mm512_xor_si512(x, flip); }
};

template <typename Map>
void pack_quads(int64_t n, const uint8_t *const *rows, const Map *maps, uint8_t *dst,
                int64_t panel_stride) {
    for (int64_t j = 0; j < n; j += 64) {
        const __mmask64 m = n - j >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - j)) - 1;
        const __m512i r0 = maps[0](_mm512_maskz_loadu_epi8(m, rows[0] + j));
        const __m512i r1 = maps[1](_mm512_maskz_loadu_epi8(m, rows[1] + j));
        const __m512i r2 = maps[2](_mm512_maskz_loadu_epi8(m, rows[2] + j));
        const __m512i r3 = maps[3](_mm512_maskz_loadu_epi8(m, rows[3] + j));
        // Within each 128-bit lane L (columns 16L..16L+15): q0 = quads of
        // columns 0-3, q1 4-7, q2 8-11, q3 12-15; then a 4x4 transpose of
        // lanes puts columns 16L..16L+15 into one vector.
        const __m512i a = _mm512_unpacklo_epi8(r0, r1), b = _mm512_unpackhi_epi8(r0, r1);
        const __m512i c = _mm512_unpacklo_epi8(r2, r3), d = _mm512_unpackhi_epi8(r2, r3);
        const __m512i q0 = _mm512_unpacklo_epi16(a, c), q1 = _mm512_unpackhi_epi16(a, c);
        const __m512i q2 = _mm512_unpacklo_epi16(b, d), q3 = _mm512_unpackhi_epi16(b, d);
        const __m512i t0 = _mm512_shuffle_i32x4(q0, q1, 0x44), t1 = _mm512_shuffle_i32x4(q2, q3, 0x44);
        const __m512i t2 = _mm512_shuffle_i32x4(q0, q1, 0xee), t3 = _mm512_shuffle_i32x4(q2, q3, 0xee);
        const __m512i o[4] = {_mm512_shuffle_i32x4(t0, t1, 0x88), _mm512_shuffle_i32x4(t0, t1, 0xdd),
                              _mm512_shuffle_i32x4(t2, t3, 0x88), _mm512_shuffle_i32x4(t2, t3, 0xdd)};
        for (int g = 0; g < 4; ++g) {
            const int64_t col = j + 16 * g;
            if (col >= n) break;
            _mm512_storeu_si512(dst + (col / kU8Cols) * panel_stride + (col % kU8Cols) * 4, o[g]);
        }
    }
}

void u8_pack(int64_t n, const uint8_t *const *rows, const uint8_t *const *luts, int flip,
             uint8_t *dst, int64_t panel_stride) {
    if (luts == nullptr) {
        const XorBytes x{_mm512_set1_epi8(static_cast<char>(flip))};
        const XorBytes maps[4] = {x, x, x, x};
        pack_quads(n, rows, maps, dst, panel_stride);
        return;
    }
    const ByteLut maps[4] = {ByteLut(luts[0]), ByteLut(luts[1]), ByteLut(luts[2]), ByteLut(luts[3])};
    pack_quads(n, rows, maps, dst, panel_stride);
}

// Column-major bytes (a Linear layer's W^T, conv2d's weights for
// channels-last pixels) hold each column's quads as 32-bit words already:
// 16 columns x 16 quads are one 16 x 16 word transpose, where the row path
// first transposed bytes into rows and then interleaved them again (the
// 64x1024x1024 exact matmul took 2.4x its row-major B's time).
template <typename Map>
void pack_column_quads(int64_t n, const uint8_t *b, int64_t col_stride, int64_t kquads,
                       const Map &map, uint8_t *dst, int64_t panel_stride) {
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
        const int64_t nc = std::min<int64_t>(16, n - j0);
        uint8_t *group = dst + (j0 / kU8Cols) * panel_stride + (j0 % kU8Cols) * 4;
        for (int64_t q0 = 0; q0 < kquads; q0 += 16) {
            const int64_t nq = std::min<int64_t>(16, kquads - q0);
            const auto m = static_cast<__mmask16>((1u << nq) - 1);
            __m512i r[16], t[16], v[4][4];
            for (int64_t c = 0; c < 16; ++c)
                r[c] = c < nc ? _mm512_maskz_loadu_epi32(m, b + (j0 + c) * col_stride + q0 * 4)
                              : _mm512_setzero_si512();
            // r[c] word q -> o[q] word c: pairs of columns, then fours
            // (v[G][e], lane l: columns 4G..4G+3 of quad 4l+e), then lanes
            for (int c = 0; c < 16; c += 2) {
                t[c] = _mm512_unpacklo_epi32(r[c], r[c + 1]);
                t[c + 1] = _mm512_unpackhi_epi32(r[c], r[c + 1]);
            }
            for (int g = 0; g < 4; ++g) {
                v[g][0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
                v[g][1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
                v[g][2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
                v[g][3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
            }
            for (int e = 0; e < 4; ++e) {
                const __m512i x0 = _mm512_shuffle_i32x4(v[0][e], v[1][e], 0x44);
                const __m512i x1 = _mm512_shuffle_i32x4(v[2][e], v[3][e], 0x44);
                const __m512i x2 = _mm512_shuffle_i32x4(v[0][e], v[1][e], 0xee);
                const __m512i x3 = _mm512_shuffle_i32x4(v[2][e], v[3][e], 0xee);
                const __m512i o[4] = {_mm512_shuffle_i32x4(x0, x1, 0x88), _mm512_shuffle_i32x4(x0, x1, 0xdd),
                                      _mm512_shuffle_i32x4(x2, x3, 0x88), _mm512_shuffle_i32x4(x2, x3, 0xdd)};
                for (int l = 0; l < 4; ++l) {
                    const int64_t q = 4 * l + e;
                    if (q < nq) _mm512_storeu_si512(group + (q0 + q) * kU8Cols * 4, map(o[l]));
                }
            }
        }
    }
}

void u8_pack_columns(int64_t n, const uint8_t *b, int64_t col_stride, int64_t kquads,
                     const uint8_t *lut, int flip, uint8_t *dst, int64_t panel_stride) {
    if (lut == nullptr)
        pack_column_quads(n, b, col_stride, kquads, XorBytes{_mm512_set1_epi8(static_cast<char>(flip))},
                          dst, panel_stride);
    else
        pack_column_quads(n, b, col_stride, kquads, ByteLut(lut), dst, panel_stride);
}
#pragma GCC diagnostic pop
constexpr auto kU8Micro = u8_micro;
constexpr auto kU8Lut = u8_lut;
constexpr auto kU8Pack = u8_pack;
constexpr auto kU8PackColumns = u8_pack_columns;
#else
constexpr int kU8Rows = 0, kU8Cols = 0, kU8TileQuads = 0;
constexpr int kU8NibbleErrorMinRank = Vec::nibble_error_min_rank;
constexpr const char *kU8Kernel = nullptr;
constexpr void (*kU8Tiles)(int) = nullptr;
constexpr void (*kU8Micro)(int64_t, const uint8_t *, const uint8_t *, int32_t *, int64_t, int,
                           int) = nullptr;

// Without vpermi2b, the byte table as 16 tables of 16 entries, one per high
// nibble: t = code - 16 h keeps the low nibble, and adding 0x70 with
// saturation sets bit 7 (vpshufb's "zero this lane") unless t's high
// nibble is 0, so each lane takes exactly its own table's entry.
void u8_lut(int64_t n, const uint8_t *src, const uint8_t *lut, uint8_t *dst) {
    int64_t j = 0;
#if defined(__AVX2__)
    const __m256i sixteen = _mm256_set1_epi8(16), keep = _mm256_set1_epi8(0x70);
    for (; j + 32 <= n; j += 32) {
        __m256i t = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + j));
        __m256i r = _mm256_setzero_si256();
        for (int h = 0; h < 16; ++h) {
            const __m256i table = _mm256_broadcastsi128_si256(
                _mm_loadu_si128(reinterpret_cast<const __m128i *>(lut + 16 * h)));
            r = _mm256_or_si256(r, _mm256_shuffle_epi8(table, _mm256_adds_epu8(t, keep)));
            t = _mm256_sub_epi8(t, sixteen);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + j), r);
    }
#endif
    for (; j < n; ++j) dst[j] = lut[src[j]];
}
constexpr auto kU8Lut = u8_lut;
constexpr void (*kU8Pack)(int64_t, const uint8_t *const *, const uint8_t *const *, int,
                          uint8_t *, int64_t) = nullptr;
constexpr void (*kU8PackColumns)(int64_t, const uint8_t *, int64_t, int64_t, const uint8_t *, int,
                                 uint8_t *, int64_t) = nullptr;
#endif

// ------------------------------------------------ byte split (split_gemm)
// The bytes of w = ((code & mask) + offset) & mask for n codes, their sums
// into *hi_sum / *lo_sum, and with Columns into col_hi / col_lo. int32
// sums (vector lanes) over runs short enough that |byte| <= 128 cannot
// overflow them.
template <bool Columns>
void byte_split_words(int64_t n, const uint16_t *__restrict src, uint32_t mask, uint32_t offset,
                      int8_t *__restrict hi, int8_t *__restrict lo, int64_t *hi_sum,
                      int64_t *lo_sum, int32_t *__restrict col_hi, int32_t *__restrict col_lo) {
    constexpr int64_t kRun = int64_t{1} << 23;
    for (int64_t j0 = 0; j0 < n; j0 += kRun) {
        int32_t sh = 0, sl = 0;
        const int64_t j1 = n - j0 < kRun ? n : j0 + kRun;
        for (int64_t j = j0; j < j1; ++j) {
            const auto w = static_cast<int32_t>(((uint32_t{src[j]} & mask) + offset) & mask);
            const int32_t h = (w >> 8) - 128, l = (w & 255) - 128;
            hi[j] = static_cast<int8_t>(h);
            lo[j] = static_cast<int8_t>(l);
            sh += h, sl += l;
            if (Columns) col_hi[j] += h, col_lo[j] += l;
        }
        *hi_sum += sh, *lo_sum += sl;
    }
}

// With a lut (w = lut[code & mask]) the loop above does not vectorise (a
// 16-bit gather per code, 5 cycles each on a Zen 4: 40 % of a 16-bit DRUM
// matmul): the lookups go into a short run of words first, which the
// vectorised loop then splits.
template <bool Columns>
void byte_split_lut(int64_t n, const uint16_t *__restrict src, uint32_t mask,
                    const uint16_t *__restrict lut, int8_t *hi, int8_t *lo, int64_t *hi_sum,
                    int64_t *lo_sum, int32_t *col_hi, int32_t *col_lo) {
    constexpr int64_t kWords = 512;
    alignas(64) uint16_t words[kWords];
    for (int64_t j = 0; j < n; j += kWords) {
        const int64_t m = n - j < kWords ? n - j : kWords;
        for (int64_t t = 0; t < m; ++t) words[t] = lut[src[j + t] & mask];
        byte_split_words<Columns>(m, words, 0xffff, 0, hi + j, lo + j, hi_sum, lo_sum,
                                  Columns ? col_hi + j : nullptr, Columns ? col_lo + j : nullptr);
    }
}

void byte_split(int64_t n, const uint16_t *src, uint32_t mask, uint32_t offset,
                const uint16_t *lut, int8_t *hi, int8_t *lo, int64_t *hi_sum, int64_t *lo_sum,
                int32_t *col_hi, int32_t *col_lo) {
    const bool columns = col_hi != nullptr;
    if (lut != nullptr)
        (columns ? byte_split_lut<true> : byte_split_lut<false>)(n, src, mask, lut, hi, lo, hi_sum,
                                                                 lo_sum, col_hi, col_lo);
    else
        (columns ? byte_split_words<true> : byte_split_words<false>)(n, src, mask, offset, hi, lo,
                                                                     hi_sum, lo_sum, col_hi, col_lo);
}

// ------------------------------------------------------- requantization
// Branch-free int64 arithmetic (selects, variable shifts) so that the
// compiler vectorises it with this set's instructions (vpmuldq, vpsravq,
// vpsllvq on AVX-512); bit-exact with the scalar statement in
// quant/requantize.cpp and approxmul_cffi.quant.requantize_reference.

inline int64_t rq_min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t rq_max(int64_t a, int64_t b) { return a > b ? a : b; }
inline int64_t rq_sat32(int64_t x) { return rq_min(rq_max(x, -2147483648LL), 2147483647LL); }

template <typename Acc, int Step, bool Single, typename Out>
void requantize_loop(int64_t n, const Acc *__restrict acc, const int32_t *__restrict bias,
                     const int32_t *__restrict mantissa, const int32_t *__restrict shift,
                     int32_t zero_point, int32_t qmin, int32_t qmax, Out *__restrict out) {
    for (int64_t i = 0; i < n; ++i) {
        const int64_t m = mantissa[i * Step];
        const int64_t e = shift[i * Step];
        // an int64 accumulator is first clamped to +-2^32 (sat32 of the sum
        // is unchanged, |bias| < 2^31) so that adding the bias cannot overflow
        const int64_t t = rq_sat32(rq_min(rq_max(static_cast<int64_t>(acc[i]), -(int64_t{1} << 32)),
                                          int64_t{1} << 32) + bias[i * Step]);
        int64_t y;
        if (Single) {
            // (t*m + 2^(k-1)) >> k as ((t*m >> (k-1)) + 1) >> 1 (the same floor):
            // GCC 12 does not vectorise a constant shifted by per-element amounts
            const int64_t total = 31 - e;  // 1..62
            y = (((t * m) >> (total - 1)) + 1) >> 1;
        } else {
            const int64_t left = rq_max(e, 0), right = rq_max(-e, 0);
            const int64_t x = rq_sat32(static_cast<int64_t>(static_cast<uint64_t>(t) << left));
            const int64_t product = x * m;
            const int64_t nudge = product >= 0 ? (int64_t{1} << 30) : 1 - (int64_t{1} << 30);
            const int64_t sum = product + nudge;
            const int64_t high = (sum + ((sum >> 63) & 0x7fffffffLL)) >> 31;  // toward zero
            const int64_t mask = static_cast<int64_t>((1u << static_cast<uint32_t>(right)) - 1u);  // right <= 31
            const int64_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
            y = (high >> right) + ((high & mask) > threshold ? 1 : 0);
        }
        out[i] = static_cast<Out>(rq_min(rq_max(y + zero_point, qmin), qmax));
    }
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
#pragma GCC diagnostic push  // the header false positive noted at the table kernel
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// GCC vectorises the loop above for AVX-512 as written (0.67-0.74 ns per
// element on a Zen 4, 1 thread). For int32 accumulators with double rounding and
// one channel's factors per run (the output stage of every 8-bit
// conv2d/linear) the two roundings fold into one, in 64-bit lanes where
// nothing overflows. With h = SaturatingRoundingDoublingHighMul(x, m) and
// P = x m (|P| <= 2^62, m >= 0: the saturating case cannot occur):
//   h = floor((P + 2^30) / 2^31)   (gemmlowp's nudge, then truncation
//                                   toward zero, is this for either sign)
//   RoundingDivideByPOT(h, r) = floor((h + 2^(r-1) - [h < 0]) / 2^r)  (r >= 1)
// and floor(floor(a / b) / c) = floor(a / (b c)), so the code is
//   floor((P + 2^30 + 2^(30+r) - 2^31 [P < -2^30]) / 2^(31+r))
// ([h < 0] iff P < -2^30; r = 0 adds 2^30 alone). 0.35-0.40 ns per
// element there (docs/benchmarks.md, "Requantization in one rounding").
template <bool Left, bool Saturate>
struct DoubleRoundingLanes {
    static constexpr int width = 8;  // accumulators per step
    using Codes = __m512i;           // their clamped codes, in int64 lanes
    DoubleRoundingLanes(int32_t bias, int32_t mantissa, int32_t shift, int32_t zero_point,
                        int32_t qmin, int32_t qmax)
        : b(_mm512_set1_epi64(bias)), m(_mm512_set1_epi64(mantissa)),
          int32_min(_mm512_set1_epi64(INT32_MIN)), int32_max(_mm512_set1_epi64(INT32_MAX)),
          offset(_mm512_set1_epi64((int64_t{1} << 30) +
                                   (shift < 0 ? int64_t{1} << (30 - shift) : 0))),
          negative_at(_mm512_set1_epi64(-(int64_t{1} << 30))),
          negative_fix(_mm512_set1_epi64(shift < 0 ? int64_t{1} << 31 : 0)),
          zp(_mm512_set1_epi64(zero_point)), lo(_mm512_set1_epi64(qmin)),
          hi(_mm512_set1_epi64(qmax)), d_lo(_mm512_set1_epi64(int64_t{qmin} - zero_point)),
          d_hi(_mm512_set1_epi64(int64_t{qmax} - zero_point)),
          left(_mm_cvtsi32_si128(shift > 0 ? shift : 0)),
          total(_mm_cvtsi32_si128(31 + (shift < 0 ? -shift : 0))) {}
    // the rounded value before the zero point and the clamp
    __m512i rounded(__m256i a) const {
        __m512i x = _mm512_add_epi64(_mm512_cvtepi32_epi64(a), b);
        if constexpr (Saturate)
            x = _mm512_min_epi64(_mm512_max_epi64(x, int32_min), int32_max);  // sat32(acc + bias)
        if constexpr (Left)  // sat32(t 2^left): |t| 2^30 fits int64
            x = _mm512_min_epi64(_mm512_max_epi64(_mm512_sll_epi64(x, left), int32_min), int32_max);
        const __m512i p = _mm512_mul_epi32(x, m);
        __m512i sum = _mm512_add_epi64(p, offset);
        sum = _mm512_mask_sub_epi64(sum, _mm512_cmplt_epi64_mask(p, negative_at), sum, negative_fix);
        return _mm512_sra_epi64(sum, total);
    }
    Codes codes(__m256i a) const {
        return _mm512_min_epi64(_mm512_max_epi64(_mm512_add_epi64(rounded(a), zp), lo), hi);
    }
    static void store(uint8_t *out, Codes c) {
        _mm_storel_epi64(reinterpret_cast<__m128i *>(out), _mm512_cvtepi64_epi8(c));
    }
    // scale * (code - zero), in double as dequantize_loop computes it; code -
    // zero is clamp(y, qmin - zero, qmax - zero), exact in these lanes (two
    // steps fewer than the code, then the difference in double)
    __m512d real(__m256i a, double scale) const {
        const __m512i d = _mm512_min_epi64(_mm512_max_epi64(rounded(a), d_lo), d_hi);
        return _mm512_mul_pd(_mm512_set1_pd(scale), _mm512_cvtepi64_pd(d));
    }
    void store_real(float *out, __m256i a, double, double scale) const {
        _mm256_storeu_ps(out, _mm512_cvtpd_ps(real(a, scale)));
    }
    void store_real(double *out, __m256i a, double, double scale) const {
        _mm512_storeu_pd(out, real(a, scale));
    }
    const __m512i b, m, int32_min, int32_max, offset, negative_at, negative_fix, zp, lo, hi, d_lo,
        d_hi;
    const __m128i left, total;
};
#pragma GCC diagnostic pop
#elif defined(__AVX2__)
// AVX2 has no 64-bit arithmetic shift, minimum or full multiply, so the
// loop above stays scalar there (2 ns per element on a Zen 3). For the
// common case (int32 accumulators, double rounding, one channel's factors
// for the whole run) this is the same arithmetic in 32-bit lanes: the
// 64-bit product of each lane through vpmuldq (even and odd lanes apart);
// bits 31..62 of the nudged product are the high half whichever way it is
// shifted, as it fits int32. Left: shift > 0 (factors of at least 1/2
// scale t up first; smaller ones, the usual case, skip that step's 8
// instructions).
// y + zero_point may not fit int32 (y reaches +-2^31): y is first clamped
// to the values that still reach qmin..qmax, which the sum then cannot pass.
inline int32_t rq_to32(int64_t v) {
    return static_cast<int32_t>(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v);
}

template <bool Left, bool Saturate>
struct DoubleRoundingLanes {
    static constexpr int width = 8;  // accumulators per step
    using Codes = __m256i;           // their clamped codes, in int32 lanes
    DoubleRoundingLanes(int32_t bias, int32_t mantissa, int32_t shift, int32_t zero_point,
                        int32_t qmin, int32_t qmax)
        : b(_mm256_set1_epi32(bias)), m(_mm256_set1_epi32(mantissa)),
          left(_mm_cvtsi32_si128(shift > 0 ? shift : 0)),
          right(_mm_cvtsi32_si128(shift < 0 ? -shift : 0)),
          mask(_mm256_set1_epi32(static_cast<int32_t>((1u << (shift < 0 ? -shift : 0)) - 1u))),
          half_mask(_mm256_srli_epi32(mask, 1)),
          y_lo(_mm256_set1_epi32(rq_to32(int64_t{qmin} - zero_point))),
          y_hi(_mm256_set1_epi32(rq_to32(int64_t{qmax} - zero_point))),
          lo(_mm256_set1_epi32(qmin)), hi(_mm256_set1_epi32(qmax)),
          zp(_mm256_set1_epi32(zero_point)) {}
    // SaturatingRoundingDoublingHighMul(x, m) of the even lanes: floor((x m +
    // 2^30) / 2^31) for either sign (see the AVX-512 version), whose low 32
    // bits a logical shift gives as well as an arithmetic one would
    __m256i high_half(__m256i x) const {
        const __m256i nudge = _mm256_set1_epi64x(int64_t{1} << 30);
        return _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(x, m), nudge), 31);
    }
    Codes codes(__m256i a) const {
        const __m256i zero = _mm256_setzero_si256(), int_max = _mm256_set1_epi32(0x7fffffff);
        // t = sat32(a + bias): overflow when both addends' signs differ from the sum's
        __m256i t = _mm256_add_epi32(a, b);
        if constexpr (Saturate) {
            const __m256i over = _mm256_srai_epi32(  // a whole-lane mask, as blendv reads every byte
                _mm256_and_si256(_mm256_xor_si256(a, t), _mm256_xor_si256(b, t)), 31);
            t = _mm256_blendv_epi8(t, _mm256_xor_si256(_mm256_srai_epi32(a, 31), int_max), over);
        }
        // x = sat32(t * 2^left)
        __m256i x = t;
        if constexpr (Left) {
            x = _mm256_sll_epi32(t, left);
            const __m256i lost = _mm256_xor_si256(_mm256_sra_epi32(x, left), t);
            x = _mm256_blendv_epi8(x, _mm256_xor_si256(_mm256_srai_epi32(t, 31), int_max),
                                   _mm256_xor_si256(_mm256_cmpeq_epi32(lost, zero),
                                                    _mm256_set1_epi32(-1)));
        }
        const __m256i even = high_half(x), odd = high_half(_mm256_srli_epi64(x, 32));
        const __m256i high = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xaa);
        // RoundingDivideByPOT(high, right): ties away from zero
        const __m256i threshold = _mm256_sub_epi32(half_mask, _mm256_cmpgt_epi32(zero, high));
        const __m256i up = _mm256_cmpgt_epi32(_mm256_and_si256(high, mask), threshold);
        const __m256i y = _mm256_sub_epi32(_mm256_sra_epi32(high, right), up);
        const __m256i inside = _mm256_min_epi32(_mm256_max_epi32(y, y_lo), y_hi);
        return _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(inside, zp), lo), hi);
    }
    static void store(uint8_t *out, Codes c) {
        const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,
                                                   -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1,
                                                   -1, -1, -1, -1, -1, -1, -1, -1);
        const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(c, low_bytes),
                                                          _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
        _mm_storel_epi64(reinterpret_cast<__m128i *>(out), _mm256_castsi256_si128(bytes));
    }
    // scale * (code - zero) of the low and high four codes, in double as
    // dequantize_loop computes it
    static __m256d real(__m128i c, double zero, double scale) {
        return _mm256_mul_pd(_mm256_set1_pd(scale),
                             _mm256_sub_pd(_mm256_cvtepi32_pd(c), _mm256_set1_pd(zero)));
    }
    static void store(float *out, Codes c, double zero, double scale) {
        _mm_storeu_ps(out, _mm256_cvtpd_ps(real(_mm256_castsi256_si128(c), zero, scale)));
        _mm_storeu_ps(out + 4, _mm256_cvtpd_ps(real(_mm256_extracti128_si256(c, 1), zero, scale)));
    }
    static void store(double *out, Codes c, double zero, double scale) {
        _mm256_storeu_pd(out, real(_mm256_castsi256_si128(c), zero, scale));
        _mm256_storeu_pd(out + 4, real(_mm256_extracti128_si256(c, 1), zero, scale));
    }
    template <typename Real>
    void store_real(Real *out, __m256i a, double zero, double scale) const {
        store(out, codes(a), zero, scale);
    }
    const __m256i b, m;
    const __m128i left, right;
    const __m256i mask, half_mask, y_lo, y_hi, lo, hi, zp;
};
#endif

#if defined(__AVX2__)  // the AVX-512 set defines it too: either version above
// The lanes' steps over acc[0..n) (plus term[i] modulo 2^32 when Term, as
// conv2d adds its x cross term): emit(i, sums) for each step's sums, which
// it turns into codes or real values. Returns the elements done, a multiple
// of the lanes' width.
template <bool Term, typename Lanes, typename Emit>
int64_t double_rounding_lanes(const Lanes &, int64_t n, const int32_t *acc, const int32_t *term,
                              const Emit &emit) {
    int64_t i = 0;
    for (; i + Lanes::width <= n; i += Lanes::width) {
        __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(acc + i));
        if constexpr (Term)
            a = _mm256_add_epi32(a, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(term + i)));
        emit(i, a);
    }
    return i;
}

// fn(lanes) with the lanes of one channel's factors (Left chosen by shift;
// Saturate false where the caller knows acc + bias fits int32)
template <typename Fn>
void with_double_rounding_lanes(int32_t bias, int32_t mantissa, int32_t shift, int32_t zero_point,
                                int32_t qmin, int32_t qmax, bool saturate, const Fn &fn) {
    auto make = [&](auto left, auto sat) {
        fn(DoubleRoundingLanes<decltype(left)::value, decltype(sat)::value>(
            bias, mantissa, shift, zero_point, qmin, qmax));
    };
    using Yes = std::true_type;
    using No = std::false_type;
    if (shift > 0)
        saturate ? make(Yes{}, Yes{}) : make(Yes{}, No{});
    else
        saturate ? make(No{}, Yes{}) : make(No{}, No{});
}
#endif

template <typename Acc, bool Single, typename Out>
void requantize_acc(int64_t n, const void *acc, const int32_t *bias, const int32_t *mantissa,
                    const int32_t *shift, int step, int32_t zero_point, int32_t qmin,
                    int32_t qmax, Out *out) {
    const Acc *a = static_cast<const Acc *>(acc);
#if defined(__AVX2__)
    if (std::is_same<Acc, int32_t>::value && std::is_same<Out, uint8_t>::value && !Single &&
        step == 0) {
        auto *codes = reinterpret_cast<uint8_t *>(out);
        int64_t done = 0;
        with_double_rounding_lanes(*bias, *mantissa, *shift, zero_point, qmin, qmax, true, [&](const auto &lanes) {
            done = double_rounding_lanes<false>(lanes, n, reinterpret_cast<const int32_t *>(a), nullptr,
                                                [&](int64_t i, __m256i sums) {
                                                    lanes.store(codes + i, lanes.codes(sums));
                                                });
        });
        a += done, out += done, n -= done;
    }
#endif
    if (step == 0)
        requantize_loop<Acc, 0, Single>(n, a, bias, mantissa, shift, zero_point, qmin, qmax, out);
    else
        requantize_loop<Acc, 1, Single>(n, a, bias, mantissa, shift, zero_point, qmin, qmax, out);
}

// ------------------------------------------------ depthwise taps (conv.cpp)
// acc[o] += sum over t < taps of plane[offsets[t] + o * step] * v[t], o < n:
// the taps of a depthwise layer over an output row segment, a pass per tap
// vectorised by the compiler for each set, in one call (on 7x7 planes a
// call per tap cost about as much as its work).
template <typename Acc>
void tap_rows(int64_t n, const int32_t *__restrict plane, int64_t step, int64_t taps,
              const int64_t *offsets, const int32_t *v, Acc *__restrict acc) {
    for (int64_t t = 0; t < taps; ++t) {
        const int32_t *__restrict row = plane + offsets[t];
        const Acc w = v[t];
        if (step == 1)
            for (int64_t o = 0; o < n; ++o) acc[o] += static_cast<Acc>(row[o]) * w;
        else
            for (int64_t o = 0; o < n; ++o) acc[o] += static_cast<Acc>(row[o * step]) * w;
    }
}

using Lanes32 = int32_t __attribute__((vector_size(kDepthwiseLanes * 4)));
static_assert(kDepthwiseLanes == 16, "the transposes are 16 x 16");

// tap_lanes32: a vector of kDepthwiseLanes int32 lanes per position, in
// GCC's vector type (one zmm on AVX-512, two ymm on AVX2), the sum kept in
// it over the taps: the products of one output for 16 channels at once.
void tap_lanes32(int64_t OH, int64_t OW, int64_t row_step, int64_t s1,
                 const int32_t *__restrict plane, int64_t taps, const int64_t *offsets,
                 const int32_t *__restrict v, int32_t *__restrict acc) {
    constexpr int64_t L = kDepthwiseLanes;
    // kOutputs outputs of a row at once, sharing each tap's factors and offset
    constexpr int kOutputs = 4;
    for (int64_t oy = 0; oy < OH; ++oy) {
        int64_t ox = 0;
        auto outputs = [&](auto count) {
            constexpr int U = decltype(count)::value;
            const int32_t *at = plane + (oy * row_step + ox * s1) * L;
            int32_t *out = acc + (oy * OW + ox) * L;
            Lanes32 sum[U] = {}, x, w;  // (memcpy: unaligned loads, no vector passed by value)
            for (int64_t t = 0; t < taps; ++t) {
                std::memcpy(&w, v + t * L, sizeof w);
                const int32_t *tap = at + offsets[t] * L;
                for (int u = 0; u < U; ++u) {
                    std::memcpy(&x, tap + u * s1 * L, sizeof x);
                    sum[u] += x * w;
                }
            }
            for (int u = 0; u < U; ++u) std::memcpy(out + u * L, &sum[u], sizeof(Lanes32));
        };
        for (; ox + kOutputs <= OW; ox += kOutputs) outputs(std::integral_constant<int, kOutputs>{});
        for (; ox < OW; ++ox) outputs(std::integral_constant<int, 1>{});
    }
}

// The 16 x 16 transpose r[i][j] -> r[j][i] of 16 vectors of 16 int32:
// four butterfly stages, stage s pairing vectors i and i + s, each a pair
// of two-input shuffles (__builtin_shufflevector in clang and GCC 12 on,
// GCC's own __builtin_shuffle before; the vectors by reference, as the
// sets without AVX-512 pass 64-byte vectors under another ABI).
template <int S, typename V, int... J>
void butterfly(const V &a, const V &b, V &lo, V &hi, std::integer_sequence<int, J...>) {
#if defined(__clang__) || __GNUC__ >= 12
    lo = __builtin_shufflevector(a, b, ((J & S) ? 16 + J - S : J)...);
    hi = __builtin_shufflevector(a, b, ((J & S) ? 16 + J : J + S)...);
#else
    lo = __builtin_shuffle(a, b, V{((J & S) ? 16 + J - S : J)...});
    hi = __builtin_shuffle(a, b, V{((J & S) ? 16 + J : J + S)...});
#endif
}

template <int S, typename V>
void transpose_stage(V (&r)[16]) {
    for (int i = 0; i < 16; ++i) {
        if (i & S) continue;
        const V a = r[i], b = r[i + S];
        butterfly<S>(a, b, r[i], r[i + S], std::make_integer_sequence<int, 16>{});
    }
}

template <typename V>
[[gnu::always_inline]] inline void transpose16(V (&r)[16]) {
    transpose_stage<8>(r);
    transpose_stage<4>(r);
    transpose_stage<2>(r);
    transpose_stage<1>(r);
}

using SignedBytes16 = int8_t __attribute__((vector_size(16)));
using Bytes16 = uint8_t __attribute__((vector_size(16)));

// 16 bytes widened to int32 lanes, by the set's own instruction where it has
// one (GCC 12 built __builtin_convertvector's here from scalar inserts)
template <typename Byte, typename Bytes>
void widen16(const uint8_t *from, Lanes32 &wide) {
#if defined(__AVX512F__)  // (maskz: GCC 12 warns of the plain forms' undefined source)
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from));
    const __m512i w = std::is_signed_v<Byte> ? _mm512_maskz_cvtepi8_epi32(0xffff, b)
                                             : _mm512_maskz_cvtepu8_epi32(0xffff, b);
    std::memcpy(&wide, &w, sizeof wide);
#elif defined(__AVX2__)
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from));
    const __m256i halves[2] = {
        std::is_signed_v<Byte> ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b),
        std::is_signed_v<Byte> ? _mm256_cvtepi8_epi32(_mm_srli_si128(b, 8))
                               : _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8))};
    std::memcpy(&wide, halves, sizeof wide);
#else
    Bytes b;
    std::memcpy(&b, from, sizeof b);
    wide = __builtin_convertvector(b, Lanes32);
#endif
}

// (widened first: GCC turns two-input byte shuffles into scalar inserts)
template <typename Byte, typename Bytes>
void lanes_from_bytes(int64_t count, const uint8_t *codes, int64_t plane_step, int32_t *lanes) {
    int64_t p = 0;
    for (; p + 16 <= count; p += 16) {
        Lanes32 r[16];
        for (int l = 0; l < 16; ++l) widen16<Byte, Bytes>(codes + l * plane_step + p, r[l]);
        transpose16(r);
        for (int i = 0; i < 16; ++i) std::memcpy(lanes + (p + i) * 16, &r[i], sizeof(Lanes32));
    }
    for (; p < count; ++p)
        for (int l = 0; l < 16; ++l) lanes[p * 16 + l] = static_cast<Byte>(codes[l * plane_step + p]);
}

void lanes_from_planes(int64_t count, const uint8_t *codes, int64_t plane_step, int is_signed,
                       int32_t *lanes) {
    (is_signed ? lanes_from_bytes<int8_t, SignedBytes16>
               : lanes_from_bytes<uint8_t, Bytes16>)(count, codes, plane_step, lanes);
}

void lanes_to_rows(int64_t count, const int32_t *lanes, const int32_t *add, int32_t *rows,
                   int64_t row_step) {
    int64_t p = 0;
    for (; p + 16 <= count; p += 16) {
        Lanes32 r[16];
        for (int i = 0; i < 16; ++i) std::memcpy(&r[i], lanes + (p + i) * 16, sizeof(Lanes32));
        transpose16(r);
        for (int l = 0; l < 16; ++l) {
            r[l] += add[l];
            std::memcpy(rows + l * row_step + p, &r[l], sizeof(Lanes32));
        }
    }
    for (; p < count; ++p)
        for (int l = 0; l < 16; ++l) rows[l * row_step + p] = lanes[p * 16 + l] + add[l];
}

template <typename Out>
void requantize_into(int64_t n, const void *acc, int acc64, const int32_t *bias,
                     const int32_t *mantissa, const int32_t *shift, int step, int32_t zero_point,
                     int32_t qmin, int32_t qmax, int single, Out *out) {
    if (acc64)
        (single ? requantize_acc<int64_t, true, Out> : requantize_acc<int64_t, false, Out>)(
            n, acc, bias, mantissa, shift, step, zero_point, qmin, qmax, out);
    else
        (single ? requantize_acc<int32_t, true, Out> : requantize_acc<int32_t, false, Out>)(
            n, acc, bias, mantissa, shift, step, zero_point, qmin, qmax, out);
}

void requantize(int64_t n, const void *acc, int acc64, const int32_t *bias,
                const int32_t *mantissa, const int32_t *shift, int step, int32_t zero_point,
                int32_t qmin, int32_t qmax, int single, int out_code, void *out) {
    // int8 and uint8 (or int16 and uint16) share the stores: the clamped
    // value's low bits are the two's-complement code either way
    if (out_code == 3 || out_code == 4)
        requantize_into(n, acc, acc64, bias, mantissa, shift, step, zero_point, qmin, qmax, single,
                        static_cast<uint16_t *>(out));
    else
        requantize_into(n, acc, acc64, bias, mantissa, shift, step, zero_point, qmin, qmax, single,
                        static_cast<uint8_t *>(out));
}

// ------------------------------------------------- affine quantization
// The loops of quant/affine.cpp (which states the arithmetic and splits the
// work), compiled here so that each set divides and converts with its own
// vector width. Compiler builtins only: no <cmath> inline function gets an
// out-of-line copy per set (see isa.hpp). GCC if-converts the clamps into
// vector code only when FP compares may not trap; that changes no value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

// floor(|v| + 0.5) is taken by truncating to int32, which vectorizes where
// floor may not. |v| is capped first: any |v| >= 2^30 gives a code beyond
// qmin..qmax (|q| <= 65535) whatever the zero point (|z| <= 2^24), exactly
// as the uncapped value would.
constexpr double kQuantizeCap = 1073741824.0;  // 2^30

// Whether x is refused: Refuse 1, NaN; 2, NaN or +-infinity (x - x is 0
// for finite x and NaN for the others).
template <int Refuse, typename In>
inline bool refused(In x) {
    return Refuse == 2 ? x - x != 0 : Refuse == 1 && x != x;
}

// After the rounding the code is an integer (|r| <= 2^30, |zero| <= 2^24):
// sign, zero point and clamp in int32 lanes, half the width of the double
// ones (a fifth less time than the same steps in double on a Zen 4).
template <int Step, typename In, typename Out, int Refuse = 0>
int quantize_loop(int64_t n, const In *__restrict x, const double *__restrict scale,
                  const int32_t *__restrict zero, int32_t lo, int32_t hi, Out *__restrict out) {
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
        bad |= refused<Refuse>(x[i]);
        const double v = static_cast<double>(x[i]) / scale[i * Step];
        double a = __builtin_fabs(v);
        a = a < kQuantizeCap ? a : kQuantizeCap;
        const int32_t r = static_cast<int32_t>(a + 0.5);
        int32_t q = (v < 0 ? -r : r) + zero[i * Step];
        q = q < lo ? lo : q;
        q = q > hi ? hi : q;
        out[i] = static_cast<Out>(q);
    }
    return bad;
}

// float32 activations with one scale (what every adapter quantizes per
// call) in float32 lanes, twice the width of the double ones: a =
// |x| * fl32(1/s), t = a + 0.5, r = trunc(t). Against the exact u = |x|/s,
// |t - (u + 0.5)| <= (R + 1) 2^-22.3 while a stays below the cap R + 1/4,
// R = max(|qmin - zero|, |qmax - zero|) + 2 (fl32(1/s) and the product
// round by 2^-24 each, t by its own half ulp); beyond the cap every code
// clamps alike, and capped a gives t = R + 3/4. So where t lies farther than thr = (R + 1) 2^-21 from an integer,
// r = floor(u + 0.5), which is also what the double loop computes (it
// differs from that only within (u + 1) 2^-52 of a tie). A block with any t
// closer than that is redone by the double loop (fast_quantize's redo):
// about 2 thr of the values, 0.1 % for 8-bit codes.
struct FastQuantize {
    float rcp, cap, thr;
    static constexpr int64_t kBlock = 32;
    // usable when fl32(1/s) is a normal float and R small enough that the
    // blocks redone stay rare (codes of up to 10 bits)
    static bool usable(double scale, int32_t zero, int32_t lo, int32_t hi, FastQuantize *f) {
        const int64_t reach = 2 + (int64_t{hi} - zero > int64_t{zero} - lo ? int64_t{hi} - zero
                                                                           : int64_t{zero} - lo);
        const double rcp = 1.0 / scale;
        if (reach > 1026 || !(rcp >= 1.1754943508222875e-38 && rcp <= 3.4028234663852886e38))
            return false;
        f->rcp = static_cast<float>(rcp);
        f->cap = static_cast<float>(reach) + 0.25f;
        f->thr = static_cast<float>(reach + 1) * 0x1p-21f;
        return true;
    }
};

#pragma GCC diagnostic push  // the header false positive noted at the table kernel
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// FastQuantize's steps on n values; returns 0 when every value was clear
// of a rounding point, else 1 (the codes written must then be redone); bad
// gains whether a value is refused (refused<Refuse>).
template <int Refuse, typename Out>
int fast_quantize_values(int64_t n, const float *__restrict x, const FastQuantize &f,
                         int32_t zero, int32_t lo, int32_t hi, Out *__restrict out, int &bad) {
    int near = 0, seen = 0;
    const float top = 1.0f - f.thr;
    for (int64_t i = 0; i < n; ++i) {
        seen |= refused<Refuse>(x[i]);
        float a = __builtin_fabsf(x[i]) * f.rcp;
        a = a < f.cap ? a : f.cap;
        const float t = a + 0.5f;
        const int32_t r = static_cast<int32_t>(t);
        const float frac = t - static_cast<float>(r);  // exact
        near |= (frac < f.thr) | (frac > top);
        int32_t q = (x[i] < 0 ? -r : r) + zero;
        q = q < lo ? lo : q;
        q = q > hi ? hi : q;
        out[i] = static_cast<Out>(q);
    }
    bad |= seen;
    return near;
}

// FastQuantize over n values in blocks of kBlock, redo(i, k) for each block
// [i, i + k) that came close to a rounding point; returns whether a value
// is refused (refused<Refuse>).
template <int Refuse, typename Out, typename Redo>
int fast_quantize(int64_t n, const float *__restrict x, const FastQuantize &f, int32_t zero,
                  int32_t lo, int32_t hi, Out *__restrict out, const Redo &redo) {
    constexpr int64_t kBlock = FastQuantize::kBlock;
    int64_t i = 0;
    int bad = 0;
#if defined(__AVX512BW__)
    // GCC keeps fast_quantize_values in 256-bit lanes here, no faster than
    // the double loop's 512-bit ones. In 16 float lanes, signed: u = x
    // fl32(1/s) has the error bound of |u| + 1/2 above, and where it is at
    // least thr from every half-integer, rint(u) is the code before the zero
    // point whichever way ties go; rounding to nearest (ties to even) needs
    // no sign, half or truncation steps. u is clamped to qmin - zero ..
    // qmax - zero (integers, |.| < R): clamps and rounding commute there, so
    // the sum with the zero point needs no clamp of its own.
    const __m512 rcp = _mm512_set1_ps(f.rcp), edge = _mm512_set1_ps(0.5f - f.thr),
                 u_lo = _mm512_set1_ps(static_cast<float>(lo - zero)),
                 u_hi = _mm512_set1_ps(static_cast<float>(hi - zero));
    const __m512i zp = _mm512_set1_epi32(zero);
    __mmask16 refused_lanes = 0;
    for (; i + kBlock <= n; i += kBlock) {
        __mmask16 close = 0;
        for (int64_t j = i; j < i + kBlock; j += 16) {
            const __m512 v = _mm512_loadu_ps(x + j);
            if constexpr (Refuse == 2)  // x - x: NaN for NaN and +-infinity
                refused_lanes |= _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), _mm512_setzero_ps(),
                                                    _CMP_NEQ_UQ);
            else if constexpr (Refuse == 1)
                refused_lanes |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            const __m512 u = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, rcp), u_lo), u_hi);
            // u - rint(u), exact, in [-1/2, 1/2]: near a tie where its size passes 1/2 - thr
            const __m512 off = _mm512_reduce_ps(u, _MM_FROUND_TO_NEAREST_INT);
            close |= _mm512_cmp_ps_mask(_mm512_abs_ps(off), edge, _CMP_GT_OQ);
            const __m512i q = _mm512_add_epi32(
                _mm512_cvt_roundps_epi32(u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
            if constexpr (sizeof(Out) == 1)
                _mm_storeu_si128(reinterpret_cast<__m128i *>(out + j), _mm512_cvtepi32_epi8(q));
            else
                _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + j), _mm512_cvtepi32_epi16(q));
        }
        if (close) redo(i, kBlock);
    }
    bad = refused_lanes != 0;
#endif
    for (; i < n; i += kBlock) {
        const int64_t k = n - i < kBlock ? n - i : kBlock;
        if (fast_quantize_values<Refuse>(k, x + i, f, zero, lo, hi, out + i, bad)) redo(i, k);
    }
    return bad;
}
#pragma GCC diagnostic pop

template <int Step, typename In, typename Out>
void dequantize_loop(int64_t n, const In *__restrict codes, const double *__restrict scale,
                     const int32_t *__restrict zero, Out *__restrict out) {
    // code - zero is exact in double (|code|, |zero| < 2^31), as NumPy's int64 difference is
    for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<Out>(scale[i * Step] * (static_cast<double>(codes[i]) -
                                                     static_cast<double>(zero[i * Step])));
}

template <bool Infinite, typename In>
int nan_loop(int64_t n, const In *x) {
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) bad |= refused<Infinite ? 2 : 1>(x[i]);
    return bad;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

// The output stage of conv2d, fused: rows of one channel's int32 sums to
// codes or to their real values (isa.hpp states it). The lanes take double
// rounding into bytes or reals; single rounding, 16-bit codes and each
// row's tail run the loops above on chunks of codes.
template <typename Out>
void requantize_rows_into(int64_t rows, int64_t cols, const int32_t *acc, const int32_t *term,
                          int64_t acc_stride, int32_t bias, int32_t mantissa, int32_t shift,
                          int32_t zero_point, int32_t qmin, int32_t qmax, int single,
                          [[maybe_unused]] int saturate, double scale, Out *out,
                          int64_t out_stride) {
    constexpr bool kReal = std::is_floating_point<Out>::value;
    auto rest = [&](int64_t n, const int32_t *a, const int32_t *t, Out *o) {
        constexpr int64_t kChunk = 64;
        int32_t sums[kChunk], codes[kChunk];
        for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
            const int64_t k = n - c0 < kChunk ? n - c0 : kChunk;
            for (int64_t i = 0; i < k; ++i)  // modulo 2^32, as the lanes add
                sums[i] = t == nullptr ? a[c0 + i]
                                       : static_cast<int32_t>(static_cast<uint32_t>(a[c0 + i]) +
                                                              static_cast<uint32_t>(t[c0 + i]));
            if (single)
                requantize_loop<int32_t, 0, true>(k, sums, &bias, &mantissa, &shift, zero_point,
                                                  qmin, qmax, codes);
            else
                requantize_loop<int32_t, 0, false>(k, sums, &bias, &mantissa, &shift, zero_point,
                                                   qmin, qmax, codes);
            if constexpr (kReal)
                dequantize_loop<0>(k, codes, &scale, &zero_point, o + c0);
            else  // the clamped value's low bits, signed codes or not alike
                for (int64_t i = 0; i < k; ++i) o[c0 + i] = static_cast<Out>(codes[i]);
        }
    };
#if defined(__AVX2__)
    if (!single && (kReal || sizeof(Out) == 1)) {
        // the lanes' constants once for all rows: rows are short (a 32x32
        // image's are 32 sums), and setting them up per row cost a third
        with_double_rounding_lanes(bias, mantissa, shift, zero_point, qmin, qmax, saturate != 0,
                                   [&](const auto &lanes) {
            for (int64_t r = 0; r < rows; ++r) {
                const int32_t *a = acc + r * acc_stride;
                const int32_t *t = term == nullptr ? nullptr : term + r * acc_stride;
                Out *o = out + r * out_stride;
                auto store = [&](int64_t i, __m256i sums) {
                    if constexpr (kReal)
                        lanes.store_real(o + i, sums, static_cast<double>(zero_point), scale);
                    else
                        lanes.store(reinterpret_cast<uint8_t *>(o + i), lanes.codes(sums));
                };
                const int64_t done = t == nullptr ? double_rounding_lanes<false>(lanes, cols, a, t, store)
                                                  : double_rounding_lanes<true>(lanes, cols, a, t, store);
                if (done < cols)  // a call the loop would otherwise pay each row
                    rest(cols - done, a + done, t == nullptr ? nullptr : t + done, o + done);
            }
        });
        return;
    }
#endif
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t skip = r * acc_stride;
        rest(cols, acc + skip, term == nullptr ? nullptr : term + skip, out + r * out_stride);
    }
}

void requantize_rows(int64_t rows, int64_t cols, const int32_t *acc, const int32_t *term,
                     int64_t acc_stride, int32_t bias, int32_t mantissa, int32_t shift,
                     int32_t zero_point, int32_t qmin, int32_t qmax, int single, int saturate,
                     double scale, int out_bytes, int real, void *out, int64_t out_stride) {
    auto run = [&](auto *typed) {
        requantize_rows_into(rows, cols, acc, term, acc_stride, bias, mantissa, shift, zero_point,
                             qmin, qmax, single, saturate, scale, typed, out_stride);
    };
    if (real)
        out_bytes == 8 ? run(static_cast<double *>(out)) : run(static_cast<float *>(out));
    else
        out_bytes == 2 ? run(static_cast<uint16_t *>(out)) : run(static_cast<uint8_t *>(out));
}

// Calls f with a null pointer of the C type a code names: approxmul_dtype
// values 1..5 (int8, uint8, int16, uint16, int32), validated by the caller.
template <typename F>
void with_code_type(int code, F &&f) {
    switch (code) {
    case 1: f(static_cast<int8_t *>(nullptr)); break;
    case 2: f(static_cast<uint8_t *>(nullptr)); break;
    case 3: f(static_cast<int16_t *>(nullptr)); break;
    case 4: f(static_cast<uint16_t *>(nullptr)); break;
    default: f(static_cast<int32_t *>(nullptr)); break;
    }
}

template <typename F>
void with_real_type(int is64, F &&f) {
    if (is64)
        f(static_cast<double *>(nullptr));
    else
        f(static_cast<float *>(nullptr));
}

template <int Refuse>
int quantize_refusing(int64_t n, const void *x, int x64, const double *scale,
                      const int32_t *zero, int step, int32_t lo, int32_t hi, int out_code,
                      void *out) {
    int bad = 0;
    with_real_type(x64, [&](auto in_type) {
        with_code_type(out_code, [&](auto out_type) {
            using In = std::remove_pointer_t<decltype(in_type)>;
            using Out = std::remove_pointer_t<decltype(out_type)>;
            const auto *in = static_cast<const In *>(x);
            auto *codes = static_cast<Out *>(out);
            FastQuantize f;
            if constexpr (std::is_same<In, float>::value) {
                if (!step && FastQuantize::usable(*scale, *zero, lo, hi, &f)) {
                    bad = fast_quantize<Refuse>(n, in, f, *zero, lo, hi, codes,
                                                [&](int64_t i, int64_t k) {
                        quantize_loop<0, In, Out>(k, in + i, scale, zero, lo, hi, codes + i);
                    });
                    return;
                }
            }
            bad = (step ? quantize_loop<1, In, Out, Refuse> : quantize_loop<0, In, Out, Refuse>)(
                n, in, scale, zero, lo, hi, codes);
        });
    });
    return bad;
}

int quantize(int64_t n, const void *x, int x64, const double *scale, const int32_t *zero,
             int step, int32_t lo, int32_t hi, int out_code, void *out, int refuse) {
    auto run = refuse == 2 ? quantize_refusing<2> : refuse == 1 ? quantize_refusing<1>
                                                                : quantize_refusing<0>;
    return run(n, x, x64, scale, zero, step, lo, hi, out_code, out);
}

void dequantize(int64_t n, const void *codes, int code, const double *scale,
                const int32_t *zero, int step, int out64, void *out) {
    with_code_type(code, [&](auto in_type) {
        with_real_type(out64, [&](auto out_type) {
            using In = std::remove_pointer_t<decltype(in_type)>;
            using Out = std::remove_pointer_t<decltype(out_type)>;
            (step ? dequantize_loop<1, In, Out> : dequantize_loop<0, In, Out>)(
                n, static_cast<const In *>(codes), scale, zero, static_cast<Out *>(out));
        });
    });
}

int any_nan(int64_t n, const void *x, int x64, int infinite_too) {
    if (infinite_too)
        return x64 ? nan_loop<true>(n, static_cast<const double *>(x))
                   : nan_loop<true>(n, static_cast<const float *>(x));
    return x64 ? nan_loop<false>(n, static_cast<const double *>(x))
               : nan_loop<false>(n, static_cast<const float *>(x));
}

// ------------------------------------------ logarithmic families' products
// Mitchell's and ILM's products from each operand's leading-one position k
// and low part m (|x| = 2^k + m), in lanes of int64: products of magnitudes
// below 2^17 reach 2^35.
#if defined(__AVX512F__)
constexpr int kLogLanes = 8;
#elif defined(__AVX2__)
constexpr int kLogLanes = 4;
#else
constexpr int kLogLanes = 2;
#endif
using Int64Lanes = int64_t __attribute__((vector_size(kLogLanes * 8)));
// rows of a per pass over b's lanes (the b lanes loaded once for them)
constexpr int kLogRows = 4;

inline Int64Lanes load_int64s(const int64_t *p) {
    Int64Lanes v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline int leading_one(int64_t magnitude) {  // magnitude > 0
    return 63 - __builtin_clzll(static_cast<uint64_t>(magnitude));
}

// A design gives each b value `rounds` triples of planes (its leading one
// k, low part m and a nonzero mask, nj apart; triples 3 nj apart) and each
// nonzero a value a Row; a product is the sum over the row's count() rounds
// of term(row, round, k, m) masked by the round's nonzero mask.

// Mitchell: one round, M = S + max(2^(k1+k2), S), S = m1 2^k2 + m2 2^k1.
struct MitchellLanes {
    struct Row {
        int64_t k, m, power, sign;
        int count() const { return 1; }
    };
    int rounds() const { return 1; }
    Row row(int64_t magnitude, int64_t sign) const {  // magnitude > 0
        const int k = leading_one(magnitude);
        return {k, magnitude - (int64_t{1} << k), int64_t{1} << k, sign};
    }
    template <class V>
    static V term(const Row &x, int, V k, V m) {
        const V s = (x.m << k) + (m << x.k), p = x.power << k;
        return s + max(p, s);
    }
    static Int64Lanes max(Int64Lanes p, Int64Lanes s) { return p > s ? p : s; }
    static int64_t max(int64_t p, int64_t s) { return std::max(p, s); }
};

// ILM with iterations + 1 rounds: each adds a_r 2^k2 + m2 2^k1 (= 2^(k1+k2)
// + m1 2^k2 + m2 2^k1) and goes on with the low parts while both are nonzero.
struct IlmLanes {
    static constexpr int kMaxRounds = 17;  // iterations up to 16 bits
    int max_rounds;
    struct Row {
        int rounds;  // the rounds in which a's part is nonzero
        int64_t value[kMaxRounds], k[kMaxRounds], sign;
        int count() const { return rounds; }
    };
    int rounds() const { return max_rounds; }
    Row row(int64_t magnitude, int64_t sign) const {
        Row x{};
        x.sign = sign;
        for (; x.rounds < max_rounds && magnitude != 0; ++x.rounds) {
            const int k = leading_one(magnitude);
            x.value[x.rounds] = magnitude;
            x.k[x.rounds] = k;
            magnitude -= int64_t{1} << k;
        }
        return x;
    }
    template <class V>
    static V term(const Row &x, int round, V k, V m) {
        return (x.value[round] << k) + (m << x.k[round]);
    }
};

// b's planes for `rounds` rounds of one magnitude (column j of nj)
inline void log_planes(int64_t magnitude, int rounds, int64_t j, int64_t nj, int64_t *plane) {
    for (int r = 0; r < rounds; ++r, plane += 3 * nj) {
        const int k = magnitude ? leading_one(magnitude) : 0;
        const int64_t low = magnitude ? magnitude - (int64_t{1} << k) : 0;
        plane[j] = k;
        plane[nj + j] = low;
        plane[2 * nj + j] = magnitude ? -1 : 0;
        magnitude = low;
    }
}

// R rows of a against b's decomposed row k, into R rows of acc: each
// round's b lanes are loaded once for the R rows (the stores into acc
// would keep a compiler from sharing loads between rows).
template <int R, class Design>
inline void log_rows(const typename Design::Row *x, int64_t nj, const int64_t *plane,
                     const int64_t *sb, int64_t *const *rows) {
    int rounds = 0;
    for (int r = 0; r < R; ++r) rounds = std::max(rounds, x[r].count());
    const int64_t whole = nj - nj % kLogLanes;
    for (int64_t j = 0; j < whole; j += kLogLanes) {
        Int64Lanes product[R] = {};
        const int64_t *p = plane + j;
        for (int q = 0; q < rounds; ++q, p += 3 * nj) {
            const Int64Lanes k = load_int64s(p), m = load_int64s(p + nj);
            const Int64Lanes nonzero = load_int64s(p + 2 * nj);
            for (int r = 0; r < R; ++r)
                if (q < x[r].count()) product[r] += Design::term(x[r], q, k, m) & nonzero;
        }
        const Int64Lanes signs = load_int64s(sb + j);
        for (int r = 0; r < R; ++r) {
            const Int64Lanes sign = signs ^ x[r].sign;  // 0 where the signs agree (unsigned: all)
            product[r] = (product[r] ^ sign) - sign;
            Int64Lanes sums = load_int64s(rows[r] + j) + product[r];
            std::memcpy(rows[r] + j, &sums, sizeof sums);
        }
    }
    for (int64_t j = whole; j < nj; ++j)
        for (int r = 0; r < R; ++r) {
            int64_t product = 0;
            const int64_t *p = plane + j;
            for (int q = 0; q < x[r].count(); ++q, p += 3 * nj)
                product += Design::term(x[r], q, p[0], p[nj]) & p[2 * nj];
            const int64_t sign = sb[j] ^ x[r].sign;
            rows[r][j] += (product ^ sign) - sign;
        }
}

// acc += the block's sums (isa.hpp, log_block): b's row k decomposed once
// for the ni rows of a, whose zero values add nothing and whose others go
// in groups of kLogRows. Signs: products of magnitudes, negated where the
// operands' signs differ (sign-magnitude; unsigned values never differ).
template <class Design>
void log_block_of(const Design &d, int64_t ni, int64_t nk, int64_t nj, const int64_t *a,
                  int64_t a_stride, const int64_t *b, int64_t b_stride, int64_t *acc,
                  int64_t acc_stride, int64_t *work) {
    int64_t *sb = work, *plane = work + nj;
    for (int64_t k = 0; k < nk; ++k) {
        for (int64_t j = 0; j < nj; ++j) {
            const int64_t v = b[k * b_stride + j];
            sb[j] = v < 0 ? -1 : 0;
            log_planes(v < 0 ? -v : v, d.rounds(), j, nj, plane);
        }
        typename Design::Row x[kLogRows];
        int64_t *rows[kLogRows];
        int filled = 0;
        for (int64_t i = 0; i < ni; ++i) {
            const int64_t v = a[i * a_stride + k];
            if (v == 0) continue;
            x[filled] = d.row(v < 0 ? -v : v, v < 0 ? -1 : 0);
            rows[filled++] = acc + i * acc_stride;
            if (filled == kLogRows) {
                log_rows<kLogRows, Design>(x, nj, plane, sb, rows);
                filled = 0;
            }
        }
        for (int r = 0; r < filled; ++r)
            log_rows<1, Design>(x + r, nj, plane, sb, rows + r);
    }
}

void log_block(int64_t ni, int64_t nk, int64_t nj, const int64_t *a, int64_t a_stride,
               const int64_t *b, int64_t b_stride, int ilm_rounds, int64_t *acc,
               int64_t acc_stride, int64_t *work) {
    if (ilm_rounds == 0)
        log_block_of(MitchellLanes{}, ni, nk, nj, a, a_stride, b, b_stride, acc, acc_stride, work);
    else
        log_block_of(IlmLanes{std::min(ilm_rounds, IlmLanes::kMaxRounds)}, ni, nk, nj, a, a_stride,
                     b, b_stride, acc, acc_stride, work);
}

#define APPROXMUL_STRINGIFY2(x) #x
#define APPROXMUL_STRINGIFY(x) APPROXMUL_STRINGIFY2(x)

const KernelTable kTable = {
    APPROXMUL_STRINGIFY(APPROXMUL_KERNEL_ISA),
    Vec::kernel,
    kTableKernel,
    kGemmRows,
    kGemmCols,
    gemm_micro,
    pair_pack,
    pair_rows,
    kTableMaxChunks * 64,
    table_block,
    kNibbleKernel,
    kNibbleRows,
    kNibbleCols,
    kNibbleBlock,
    kPtKernel,
    kPtRows,
    kPtSteps,
    kPtMinStream,
    kPtBlock,
    kU8Kernel,
    kU8Rows,
    kU8Cols,
    kU8TileQuads,
    kU8Tiles,
    kU8Micro,
    kU8Lut,
    kU8Pack,
    kU8PackColumns,
    requantize,
    requantize_rows,
    quantize,
    dequantize,
    any_nan,
    byte_split,
    Vec::max_factorized_rank,
    Vec::nibble_error_min_rank,
    kU8NibbleErrorMinRank,
    tap_rows<int32_t>,
    tap_rows<int64_t>,
    tap_lanes32,
    lanes_from_planes,
    lanes_to_rows,
    log_block,
};

}  // namespace

#define APPROXMUL_CONCAT2(a, b) a##b
#define APPROXMUL_CONCAT(a, b) APPROXMUL_CONCAT2(a, b)

const KernelTable *APPROXMUL_CONCAT(APPROXMUL_KERNEL_ISA, _kernel_table)() { return &kTable; }

}  // namespace approxmul::kernels
