#include "structure.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <tuple>
#include <utility>

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

// Small integer rank, whatever its structure (an exact multiplier plus an
// approximate circuit's error of small rank, for one): M(a,b) = sum_k
// c_k(a) h_k(b) with h_1..h_r a basis of the lattice the rows M(a, .)
// span over the integers and the c_k(a) integers. Rows of M alone rarely
// make such a basis (the exact table's rows 2 and 3 span 2b and 3b, not
// b), so the basis grows row by row, shortest rows first: a row outside
// the basis's span joins it; a row inside it with fractional coordinates
// t = sum (n_k / d) h_k gives the integer relation d t - sum n_k h_k = 0,
// and Euclid steps on that relation's coefficients turn the r + 1 vectors
// into r that span all of them (the step rho_j -= m rho_i, g_i += m g_j
// keeps sum rho g = 0, and once one coefficient is +-1 and the others 0
// its vector is 0). Pairwise size reduction keeps the basis short. Gives
// up past max_rank vectors or when an entry passes 2^40.
namespace lattice {

using i128 = __int128;
constexpr int64_t kLimit = int64_t{1} << 40;
constexpr uint64_t kPrime = (uint64_t{1} << 61) - 1;

bool small(i128 x) { return x <= kLimit && x >= -kLimit; }

// out = x p + y q, entry by entry; false past kLimit (out may alias p or q)
bool combine(int64_t x, const Vector &p, int64_t y, const Vector &q, Vector &out) {
    for (size_t i = 0; i < p.size(); ++i) {
        const i128 value = i128{x} * p[i] + i128{y} * q[i];
        if (!small(value)) return false;
        out[i] = static_cast<int64_t>(value);
    }
    return true;
}

uint64_t mod_prime(int64_t x) {
    const int64_t r = x % static_cast<int64_t>(kPrime);
    return static_cast<uint64_t>(r < 0 ? r + static_cast<int64_t>(kPrime) : r);
}

uint64_t mul_mod(uint64_t a, uint64_t b) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % kPrime);
}

uint64_t inverse_mod(uint64_t a) {  // a^(p-2)
    uint64_t result = 1, power = a;
    for (uint64_t e = kPrime - 2; e != 0; e >>= 1, power = mul_mod(power, power))
        if (e & 1) result = mul_mod(result, power);
    return result;
}

// One column per basis vector on which the basis is invertible, chosen by
// elimination modulo a prime (a basis independent there is independent
// over the rationals); false if none is found.
bool pivot_columns(const std::vector<Vector> &basis, std::vector<size_t> &columns) {
    const size_t side = basis.empty() ? 0 : basis[0].size();
    std::vector<std::vector<uint64_t>> rows;
    columns.clear();
    for (const Vector &h : basis) {
        std::vector<uint64_t> row(side);
        for (size_t i = 0; i < side; ++i) row[i] = mod_prime(h[i]);
        for (size_t k = 0; k < rows.size(); ++k) {
            const uint64_t factor = row[columns[k]];
            if (factor == 0) continue;
            for (size_t i = 0; i < side; ++i)
                row[i] = (row[i] + kPrime - mul_mod(factor, rows[k][i])) % kPrime;
        }
        size_t c = 0;
        while (c < side && row[c] == 0) ++c;
        if (c == side) return false;
        const uint64_t scale = inverse_mod(row[c]);
        for (uint64_t &x : row) x = mul_mod(x, scale);
        columns.push_back(c);
        rows.push_back(std::move(row));
    }
    return true;
}

// Coordinates of t in the basis as integers n over a common d > 0
// (sum n_k h_k == d t checked on every entry): Bareiss elimination of the
// basis restricted to the pivot columns. 0: t is outside the span; -1: the
// numbers outgrew 128 bits.
int coordinates(const std::vector<Vector> &basis, const std::vector<size_t> &columns,
                const Vector &t, std::vector<i128> &n, i128 &d) {
    const size_t k = basis.size();
    // a[i][j] = h_j[c_i], a[i][k] = t[c_i]: sum_j n_j h_j[c_i] = d t[c_i]
    std::vector<std::vector<i128>> a(k, std::vector<i128>(k + 1));
    for (size_t i = 0; i < k; ++i) {
        for (size_t j = 0; j < k; ++j) a[i][j] = basis[j][columns[i]];
        a[i][k] = t[columns[i]];
    }
    // factors below 2^60: products below 2^120, sums of seven below 2^123
    constexpr i128 kRoom = i128{1} << 60;
    auto fits = [&](i128 x) { return x < kRoom && x > -kRoom; };
    i128 previous = 1;
    for (size_t p = 0; p < k; ++p) {
        size_t pivot = p;
        while (pivot < k && a[pivot][p] == 0) ++pivot;
        if (pivot == k) return -1;  // singular: the columns were chosen badly
        std::swap(a[p], a[pivot]);
        for (size_t i = p + 1; i < k; ++i) {
            for (size_t j = p + 1; j <= k; ++j) {
                if (!fits(a[p][p]) || !fits(a[i][j]) || !fits(a[i][p]) || !fits(a[p][j]))
                    return -1;
                a[i][j] = (a[p][p] * a[i][j] - a[i][p] * a[p][j]) / previous;
            }
            a[i][p] = 0;
        }
        previous = a[p][p];
    }
    d = a[k - 1][k - 1];  // the determinant
    n.assign(k, 0);
    if (!fits(d)) return -1;
    for (size_t i = k; i-- > 0;) {  // Cramer numerators, exactly divisible
        if (!fits(a[i][k])) return -1;
        i128 sum = d * a[i][k];
        for (size_t j = i + 1; j < k; ++j) {
            if (!fits(a[i][j]) || !fits(n[j])) return -1;
            sum -= a[i][j] * n[j];
        }
        n[i] = sum / a[i][i];
    }
    if (d < 0) {
        d = -d;
        for (i128 &x : n) x = -x;
    }
    i128 common = d;  // the coordinates in lowest terms
    for (i128 x : n)
        for (i128 y = x < 0 ? -x : x; y != 0;) std::tie(common, y) = std::pair{y, common % y};
    d /= common;
    for (i128 &x : n) x /= common;
    for (size_t c = 0; c < t.size(); ++c) {
        i128 sum = 0;
        for (size_t j = 0; j < k; ++j) {
            if (!fits(n[j])) return -1;
            sum += n[j] * basis[j][c];
        }
        if (!fits(d) || sum != d * t[c]) return 0;
    }
    return 1;
}

// h_j -= m h_k while that shortens h_j, over all pairs, until none does
// (entries below 2^40: squared lengths below 2^92, exact)
void size_reduce(std::vector<Vector> &basis) {
    auto dot = [](const Vector &x, const Vector &y) {
        i128 sum = 0;
        for (size_t i = 0; i < x.size(); ++i) sum += i128{x[i]} * y[i];
        return sum;
    };
    Vector candidate(basis.empty() ? 0 : basis[0].size());
    for (bool shorter = true; shorter;) {
        shorter = false;
        for (size_t j = 0; j < basis.size(); ++j)
            for (size_t k = 0; k < basis.size(); ++k) {
                if (j == k) continue;
                const long double m = std::round(static_cast<long double>(dot(basis[j], basis[k])) /
                                                 static_cast<long double>(dot(basis[k], basis[k])));
                if (m == 0 || std::fabs(m) > static_cast<long double>(kLimit)) continue;
                if (!combine(1, basis[j], -static_cast<int64_t>(m), basis[k], candidate) ||
                    dot(candidate, candidate) >= dot(basis[j], basis[j]))
                    continue;
                basis[j].swap(candidate);
                shorter = true;
            }
    }
}

// Folds t into the basis by its relation d t = sum n_k h_k (d > 1).
bool fold(std::vector<Vector> &basis, Vector t, const std::vector<i128> &n, i128 d) {
    std::vector<Vector> g = basis;
    g.push_back(std::move(t));
    std::vector<i128> rho(n.begin(), n.end());
    rho.push_back(-d);
    for (;;) {  // Euclid: the smallest non-zero coefficient reduces the others
        size_t i = rho.size();
        for (size_t j = 0; j < rho.size(); ++j)
            if (rho[j] != 0 && (i == rho.size() || (rho[j] < 0 ? -rho[j] : rho[j]) <
                                                       (rho[i] < 0 ? -rho[i] : rho[i])))
                i = j;
        bool reduced = false;
        for (size_t j = 0; j < rho.size(); ++j) {
            if (j == i || rho[j] == 0) continue;
            const i128 m = rho[j] / rho[i];
            if (m == 0) continue;
            if (!small(m)) return false;
            rho[j] -= m * rho[i];
            if (!combine(1, g[i], static_cast<int64_t>(m), g[j], g[i])) return false;
            reduced = true;
        }
        if (!reduced) {  // rho is +-e_i (the relation was primitive): g_i is 0
            g.erase(g.begin() + static_cast<std::ptrdiff_t>(i));
            basis = std::move(g);
            return true;
        }
    }
}

Factorization rank_factorization(const std::vector<int32_t> &table, size_t side, int max_rank,
                                 bool transposed) {
    if (max_rank < 1) return {};
    auto row_of = [&](size_t a) {
        Vector row(side);
        for (size_t b = 0; b < side; ++b)
            row[b] = transposed ? table[b * side + a] : table[a * side + b];
        return row;
    };
    std::vector<std::pair<i128, size_t>> order(side);  // (|row|^2, row), shortest first
    for (size_t a = 0; a < side; ++a) order[a].second = a;
    for (size_t a = 0; a < side; ++a)  // in memory order, either way round
        for (size_t b = 0; b < side; ++b) {
            const int64_t x = table[a * side + b];
            order[transposed ? b : a].first += i128{x} * x;
        }
    std::sort(order.begin(), order.end());
    std::vector<Vector> basis;
    std::vector<size_t> columns;
    std::vector<i128> n;
    i128 d = 0;
    for (const auto &[norm, a] : order) {
        if (norm == 0) continue;
        Vector row = row_of(a);
        const int found = basis.empty() ? 0 : coordinates(basis, columns, row, n, d);
        if (found < 0) return {};
        if (found == 1 && d == 1) continue;  // an integer combination already
        if (found == 0) {
            if (static_cast<int>(basis.size()) == max_rank) return {};
            basis.push_back(std::move(row));
        } else if (!fold(basis, std::move(row), n, d)) {
            return {};
        }
        size_reduce(basis);
        if (!pivot_columns(basis, columns)) return {};
    }
    if (basis.empty()) return {};
    Factorization f;
    f.rank = static_cast<int>(basis.size());
    f.u.assign(basis.size() * side, 0);
    for (size_t a = 0; a < side; ++a) {  // every row's integer coordinates
        if (coordinates(basis, columns, row_of(a), n, d) != 1 || d != 1) return {};
        for (size_t k = 0; k < basis.size(); ++k) {
            if (!small(n[k])) return {};
            f.u[k * side + a] = static_cast<int64_t>(n[k]);
        }
    }
    for (const Vector &h : basis) f.v.insert(f.v.end(), h.begin(), h.end());
    if (transposed) std::swap(f.u, f.v);
    return f;
}

}  // namespace lattice

}  // namespace

Factorization find_factorization(const std::vector<int32_t> &table, int bits, int max_rank,
                                 int lattice_rank) {
    const size_t side = size_t{1} << bits;
    Factorization best = separable(table, side);
    if (best.rank == 1) return best;
    for (bool transposed : {false, true}) {
        Factorization f = bit_linear(table, bits, transposed);
        if (f.rank > 0 && (best.rank == 0 || f.rank < best.rank)) best = std::move(f);
    }
    // structure of no such form: any small rank, if its factors fit the
    // int16 GEMMs in one orientation or the other
    for (bool transposed : {false, true}) {
        if (best.rank > 0 && best.rank <= max_rank && fits_int16_kernels(best)) break;
        Factorization f =
            lattice::rank_factorization(table, side, std::min(max_rank, lattice_rank), transposed);
        if (f.rank > 0 && (best.rank == 0 || best.rank > max_rank || fits_int16_kernels(f)))
            best = std::move(f);
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
