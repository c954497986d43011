// Internal check of every kernel set this CPU can run: pair_pack against a
// plain loop (isa.hpp's layout) for widths around the panel size, signed and
// unsigned widening, 256-entry tables and a missing second row, with
// guard values that must stay untouched outside the panels it owns;
// pair_rows (A panels of byte rows) the same way, around its 8-pair step;
// u8_lut, the byte table every set has; and byte_split (split_gemm's bytes
// of 16-bit codes) against its statement in isa.hpp.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "../src/kernels/isa.hpp"

using namespace approxmul::kernels;

static int failures = 0;

static void check(const KernelTable &kt, std::mt19937 &rng, int64_t n, bool is_signed, bool tables,
                  bool second) {
    const int64_t nr = kt.gemm_nr, panels = (n + nr - 1) / nr, stride = nr * 2 + 6;
    std::vector<uint8_t> r0(static_cast<size_t>(n)), r1(static_cast<size_t>(n));
    for (auto &c : r0) c = static_cast<uint8_t>(rng());
    for (auto &c : r1) c = static_cast<uint8_t>(rng());
    std::vector<int16_t> lut0(256), lut1(256);
    for (auto &v : lut0) v = static_cast<int16_t>(rng());
    for (auto &v : lut1) v = static_cast<int16_t>(rng());
    const int16_t guard = 0x5a5a;
    std::vector<int16_t> got(static_cast<size_t>(panels * stride), guard), want = got;
    for (int64_t j = 0; j < panels * nr; ++j)
        for (int h = 0; h < 2; ++h) {
            int16_t v = 0;
            const uint8_t code = h == 0 ? (j < n ? r0[size_t(j)] : 0) : (j < n ? r1[size_t(j)] : 0);
            if (j < n && (h == 0 || second))
                v = tables ? (h == 0 ? lut0 : lut1)[code]
                           : (is_signed ? int16_t(int8_t(code)) : int16_t(code));
            want[size_t(j / nr * stride + j % nr * 2 + h)] = v;
        }
    const uint8_t *rows[2] = {r0.data(), second ? r1.data() : nullptr};
    const int16_t *luts[2] = {lut0.data(), lut1.data()};
    kt.pair_pack(n, rows, tables ? luts : nullptr, is_signed ? 1 : 0, got.data(), stride);
    for (size_t e = 0; e < got.size(); ++e)
        if (got[e] != want[e]) {
            std::printf("%s: n %lld signed %d tables %d second %d: element %zu is %d, want %d\n",
                        kt.name, (long long)n, is_signed, tables, second, e, got[e], want[e]);
            ++failures;
            return;
        }
}

// pair_rows for kpairs around the vector step, signed and unsigned, rows
// apart in memory; the element after the panel stays untouched
static void check_rows(const KernelTable &kt, std::mt19937 &rng, int64_t kpairs, bool is_signed) {
    const int64_t mr = kt.gemm_mr, stride = 2 * kpairs + 5;
    std::vector<uint8_t> codes(static_cast<size_t>(mr * stride));
    for (auto &c : codes) c = static_cast<uint8_t>(rng());
    std::vector<const uint8_t *> rows;
    for (int64_t r = 0; r < mr; ++r) rows.push_back(codes.data() + r * stride);
    const int16_t guard = 0x5a5a;
    std::vector<int16_t> got(static_cast<size_t>(kpairs * mr * 2 + 1), guard), want = got;
    for (int64_t kp = 0; kp < kpairs; ++kp)
        for (int64_t r = 0; r < mr; ++r)
            for (int h = 0; h < 2; ++h) {
                const uint8_t code = rows[size_t(r)][2 * kp + h];
                want[size_t((kp * mr + r) * 2 + h)] = is_signed ? int16_t(int8_t(code)) : int16_t(code);
            }
    kt.pair_rows(kpairs, rows.data(), is_signed ? 1 : 0, got.data());
    for (size_t e = 0; e < got.size(); ++e)
        if (got[e] != want[e]) {
            std::printf("%s pair_rows: kpairs %lld signed %d: element %zu is %d, want %d\n", kt.name,
                        (long long)kpairs, is_signed, e, got[e], want[e]);
            ++failures;
            return;
        }
}

// u8_lut (dst may be src) against the table itself, around its vector widths
static void check_lut(const KernelTable &kt, std::mt19937 &rng, int64_t n) {
    std::vector<uint8_t> lut(256), src(static_cast<size_t>(n) + 1), dst(src);
    for (auto &v : lut) v = static_cast<uint8_t>(rng());
    for (auto &c : src) c = static_cast<uint8_t>(rng());
    dst[static_cast<size_t>(n)] = 0x5a;
    kt.u8_lut(n, src.data(), lut.data(), dst.data());
    for (int64_t j = 0; j < n; ++j)
        if (dst[size_t(j)] != lut[src[size_t(j)]]) {
            std::printf("%s u8_lut n=%lld: code %d gave %d, not %d\n", kt.name, (long long)n,
                        src[size_t(j)], dst[size_t(j)], lut[src[size_t(j)]]);
            ++failures;
            return;
        }
    if (dst[size_t(n)] != 0x5a) {
        std::printf("%s u8_lut n=%lld wrote past n\n", kt.name, (long long)n);
        ++failures;
    }
    kt.u8_lut(n, src.data(), lut.data(), src.data());  // in place
    if (!std::equal(src.begin(), src.begin() + n, dst.begin())) {
        std::printf("%s u8_lut n=%lld in place differs\n", kt.name, (long long)n);
        ++failures;
    }
}

// byte_split for widths 9..16, signed offsets or none, with and without
// column sums, around the vector widths; guards after n stay untouched
static void check_split(const KernelTable &kt, std::mt19937 &rng, int64_t n, int bits,
                        bool offset, bool columns, bool with_lut) {
    const uint32_t mask = (uint32_t{1} << bits) - 1, off = offset ? (mask >> 1) + 1 : 0;
    std::vector<uint16_t> lut(size_t{mask} + 1);
    for (auto &v : lut) v = static_cast<uint16_t>(rng());
    std::vector<uint16_t> src(static_cast<size_t>(n));
    for (auto &c : src) c = static_cast<uint16_t>(rng());  // bits above the width too
    std::vector<int8_t> hi(static_cast<size_t>(n) + 1, 0x5a), lo(hi);
    std::vector<int32_t> col_hi(static_cast<size_t>(n) + 1, 7), col_lo(col_hi);
    int64_t hi_sum = 3, lo_sum = -5, want_hi = 3, want_lo = -5;
    kt.byte_split(n, src.data(), mask, off, with_lut ? lut.data() : nullptr, hi.data(), lo.data(),
                  &hi_sum, &lo_sum, columns ? col_hi.data() : nullptr,
                  columns ? col_lo.data() : nullptr);
    for (int64_t j = 0; j < n; ++j) {
        const int32_t w = with_lut ? lut[src[size_t(j)] & mask]
                                   : static_cast<int32_t>(((src[size_t(j)] & mask) + off) & mask);
        const int32_t h = (w >> 8) - 128, l = (w & 255) - 128;
        want_hi += h, want_lo += l;
        const int32_t col_h = columns ? 7 + h : 7, col_l = columns ? 7 + l : 7;
        if (hi[size_t(j)] != h || lo[size_t(j)] != l || col_hi[size_t(j)] != col_h ||
            col_lo[size_t(j)] != col_l) {
            std::printf("%s byte_split n=%lld bits=%d: element %lld differs\n", kt.name,
                        (long long)n, bits, (long long)j);
            ++failures;
            return;
        }
    }
    if (hi_sum != want_hi || lo_sum != want_lo || hi[size_t(n)] != 0x5a || lo[size_t(n)] != 0x5a ||
        col_hi[size_t(n)] != 7 || col_lo[size_t(n)] != 7) {
        std::printf("%s byte_split n=%lld bits=%d: sums or guards differ\n", kt.name, (long long)n,
                    bits);
        ++failures;
    }
}

int main() {
    std::mt19937 rng(7);
    const KernelTable *sets[] = {generic_kernel_table(), avx2_kernel_table(), avx512_kernel_table(),
                                 avx512amx_kernel_table()};
    for (const KernelTable *kt : sets) {
        if (kt == nullptr || !cpu_runs(*kt)) continue;
        int cases = 0;
        for (int64_t n = 1; n <= 3 * kt->gemm_nr + 1; ++n)
            for (int variant = 0; variant < 8; ++variant, ++cases)
                check(*kt, rng, n, variant & 1, variant & 2, variant & 4);
        std::printf("%s: %d pair_pack cases\n", kt->name, cases);
        for (int64_t kpairs : {0, 1, 7, 8, 9, 15, 16, 17, 100, 256})
            for (bool is_signed : {false, true}) check_rows(*kt, rng, kpairs, is_signed);
        for (int64_t n : {0, 1, 31, 32, 33, 63, 64, 65, 257, 1000}) check_lut(*kt, rng, n);
        for (int64_t n : {0, 1, 15, 16, 17, 63, 64, 65, 1000})
            for (int bits : {9, 12, 16})
                for (int variant = 0; variant < 8; ++variant)
                    check_split(*kt, rng, n, bits, variant & 1, variant & 2, variant & 4);
    }
    return failures == 0 ? 0 : 1;
}
