#include "structure.hpp"

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace approxmul {

namespace {

using Vector = std::vector<int64_t>;

// v divided by the gcd of its entries, first non-zero entry positive; empty if v is 0.
Vector primitive(const Vector &v) {
    int64_t g = 0;
    for (int64_t x : v) g = std::gcd(g, std::llabs(x));
    if (g == 0) return {};
    for (int64_t x : v)
        if (x != 0) {
            if (x < 0) g = -g;
            break;
        }
    Vector p(v.size());
    for (size_t i = 0; i < v.size(); ++i) p[i] = v[i] / g;
    return p;
}

// c with v == c * base, if there is one.
bool multiple_of(const Vector &v, const Vector &base, int64_t &c) {
    size_t pivot = 0;
    while (pivot < base.size() && base[pivot] == 0) ++pivot;
    if (pivot == base.size() || v[pivot] % base[pivot] != 0) return false;
    c = v[pivot] / base[pivot];
    for (size_t i = 0; i < v.size(); ++i)
        if (v[i] != c * base[i]) return false;
    return true;
}

// Adds u(a) * v to a list of terms, merging it into a term whose v is a
// multiple of the same primitive vector.
void add_term(Factorization &f, const Vector &u, const Vector &v, size_t side) {
    const Vector base = primitive(v);
    if (base.empty()) return;
    int64_t c = 0;
    for (int r = 0; r < f.rank; ++r) {
        const Vector existing(f.v.begin() + r * side, f.v.begin() + (r + 1) * side);
        if (multiple_of(v, existing, c)) {
            for (size_t a = 0; a < side; ++a) f.u[r * side + a] += c * u[a];
            return;
        }
    }
    multiple_of(v, base, c);
    for (size_t a = 0; a < side; ++a) f.u.push_back(c * u[a]);
    f.v.insert(f.v.end(), base.begin(), base.end());
    ++f.rank;
}

Factorization separable(const std::vector<int32_t> &t, size_t side) {
    for (size_t a0 = 0; a0 < side; ++a0) {
        const Vector row(t.begin() + a0 * side, t.begin() + (a0 + 1) * side);
        const Vector g = primitive(row);
        if (g.empty()) continue;
        Factorization f;
        f.rank = 1;
        f.v = g;
        for (size_t a = 0; a < side; ++a) {
            int64_t c = 0;
            if (!multiple_of(Vector(t.begin() + a * side, t.begin() + (a + 1) * side), g, c)) {
                // an all-zero row is the multiple 0; anything else is not separable
                bool zero = true;
                for (size_t b = 0; b < side; ++b) zero = zero && t[a * side + b] == 0;
                if (!zero) return {};
            }
            f.u.push_back(c);
        }
        return f;
    }
    return {};
}

// M(a,b) = M(0,b) + sum_i bit_i(a) (M(2^i, b) - M(0, b)), checked on every pair.
Factorization bit_linear(const std::vector<int32_t> &t, int bits, bool transposed) {
    const size_t side = size_t{1} << bits;
    auto at = [&](size_t a, size_t b) -> int64_t {
        return transposed ? t[b * side + a] : t[a * side + b];
    };
    for (size_t a = 0; a < side; ++a)
        for (size_t b = 0; b < side; ++b) {
            int64_t value = at(0, b);
            for (int i = 0; i < bits; ++i)
                if (a >> i & 1) value += at(size_t{1} << i, b) - at(0, b);
            if (value != at(a, b)) return {};
        }
    Factorization f;
    Vector u(side, 1), v(side);
    for (size_t b = 0; b < side; ++b) v[b] = at(0, b);
    add_term(f, u, v, side);
    for (int i = 0; i < bits; ++i) {
        for (size_t a = 0; a < side; ++a) u[a] = static_cast<int64_t>(a >> i & 1);
        for (size_t b = 0; b < side; ++b) v[b] = at(size_t{1} << i, b) - at(0, b);
        add_term(f, u, v, side);
    }
    if (transposed) std::swap(f.u, f.v);
    return f;
}

}  // namespace

Factorization find_factorization(const std::vector<int32_t> &table, int bits, int max_rank) {
    const size_t side = size_t{1} << bits;
    Factorization best = separable(table, side);
    if (best.rank == 1) return best;
    for (bool transposed : {false, true}) {
        Factorization f = bit_linear(table, bits, transposed);
        if (f.rank > 0 && (best.rank == 0 || f.rank < best.rank)) best = std::move(f);
    }
    if (best.rank > max_rank) return {};
    return best;
}

bool fits_split_kernels(const Factorization &f) {
    if (f.rank <= 0 || f.rank > kMaxSplitRank) return false;
    constexpr int64_t limit = int64_t{1} << 23;
    auto fits = [&](int64_t x) { return x >= -limit && x < limit; };
    return std::all_of(f.u.begin(), f.u.end(), fits) && std::all_of(f.v.begin(), f.v.end(), fits);
}

std::array<Factorization, 3> split_factorization(const Factorization &f) {
    const size_t side = f.rank > 0 ? f.u.size() / static_cast<size_t>(f.rank) : 0;
    auto lo = [](int64_t x) { return x & 0xff; };
    auto hi = [](int64_t x) { return (x - (x & 0xff)) / 256; };  // exact: floor division
    // appends factor r of `from`, its low or high parts, as a new term's half
    auto append = [&](std::vector<int64_t> &to, const std::vector<int64_t> &from, int r, bool high) {
        for (size_t x = 0; x < side; ++x) {
            const int64_t value = from[size_t(r) * side + x];
            to.push_back(high ? hi(value) : lo(value));
        }
    };
    // (part, u high, v high) of each term of each rank
    constexpr struct { int part; bool u_high, v_high; } kTerms[] = {
        {0, false, false}, {1, true, false}, {1, false, true}, {2, true, true}};
    std::array<Factorization, 3> parts;
    for (int r = 0; r < f.rank; ++r)
        for (const auto &term : kTerms) {
            Factorization &p = parts[size_t(term.part)];
            append(p.u, f.u, r, term.u_high);
            append(p.v, f.v, r, term.v_high);
            ++p.rank;
        }
    return parts;
}

bool fits_int16_kernels(const Factorization &f) {
    if (f.rank <= 0) return false;
    const size_t side = f.u.size() / static_cast<size_t>(f.rank);
    int64_t bound = 0;
    for (int r = 0; r < f.rank; ++r) {
        int64_t max_u = 0, max_v = 0;
        for (size_t x = 0; x < side; ++x) {
            const int64_t u = f.u[r * side + x], v = f.v[r * side + x];
            if (u < INT16_MIN || u > INT16_MAX || v < INT16_MIN || v > INT16_MAX) return false;
            max_u = std::max<int64_t>(max_u, std::llabs(u));
            max_v = std::max<int64_t>(max_v, std::llabs(v));
        }
        bound += max_u * max_v;
    }
    return bound <= INT32_MAX;
}

std::vector<uint8_t> byte_planes(const std::vector<int32_t> &table, int bits, int32_t offset,
                                 bool transposed) {
    const size_t side = size_t{1} << bits;
    std::vector<uint8_t> planes(256 * 512, 0);
    for (size_t s = 0; s < side; ++s)
        for (size_t x = 0; x < side; ++x) {
            const int64_t value =
                int64_t{transposed ? table[x * side + s] : table[s * side + x]} - offset;
            if (value < 0 || value > 0xffff) return {};
            planes[s * 512 + x] = static_cast<uint8_t>(value & 0xff);
            planes[s * 512 + 256 + x] = static_cast<uint8_t>(value >> 8);
        }
    return planes;
}

}  // namespace approxmul
