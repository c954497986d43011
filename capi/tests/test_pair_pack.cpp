// Internal check of every kernel set this CPU can run: pair_pack against a
// plain loop (isa.hpp's layout) for widths around the panel size, signed and
// unsigned widening, 256-entry tables and a missing second row, with
// guard values that must stay untouched outside the panels it owns; and
// u8_lut, the byte table every set has.
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

int main() {
    std::mt19937 rng(7);
    const KernelTable *sets[] = {generic_kernel_table(), avx2_kernel_table(), avx512_kernel_table()};
    for (const KernelTable *kt : sets) {
        if (kt == nullptr || !cpu_runs(*kt)) continue;
        int cases = 0;
        for (int64_t n = 1; n <= 3 * kt->gemm_nr + 1; ++n)
            for (int variant = 0; variant < 8; ++variant, ++cases)
                check(*kt, rng, n, variant & 1, variant & 2, variant & 4);
        std::printf("%s: %d pair_pack cases\n", kt->name, cases);
        for (int64_t n : {0, 1, 31, 32, 33, 63, 64, 65, 257, 1000}) check_lut(*kt, rng, n);
    }
    return failures == 0 ? 0 : 1;
}
