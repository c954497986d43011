// Exhaustive error metrics, e = approx - exact over every operand pair
// (4^n pairs; 2^32 for 16 bits, rows spread over the threads). Sums are
// kept in integers (128-bit where 2^32 squared errors need it) and the
// floating-point relative errors per row, added in row order, so results do
// not depend on the thread count. Definitions: docs/metrics.md.
#include <cmath>
#include <limits>

#include "../core/error.hpp"
#include "../core/threads.hpp"
#include "../kernels/parallel.hpp"
#include "library.hpp"

namespace approxmul::library {
namespace {

__extension__ typedef __int128 int128;
__extension__ typedef unsigned __int128 uint128;

struct Sums {
    int128 sum_error = 0;
    uint128 sum_abs = 0, sum_square = 0;
    int64_t wrong = 0, zero_products = 0;
    uint64_t worst = 0;
    double worst_relative = 0;
    int64_t min_error = std::numeric_limits<int64_t>::max();
    int64_t max_error = std::numeric_limits<int64_t>::min();

    void add(const Sums &o) {
        sum_error += o.sum_error;
        sum_abs += o.sum_abs;
        sum_square += o.sum_square;
        wrong += o.wrong;
        zero_products += o.zero_products;
        worst = std::max(worst, o.worst);
        worst_relative = std::max(worst_relative, o.worst_relative);
        min_error = std::min(min_error, o.min_error);
        max_error = std::max(max_error, o.max_error);
    }
};

// One row (first operand a) over every second operand; products from get(a, b).
// Returns the row's sum of relative errors.
template <class Get>
double scan_row(const Multiplier &m, int64_t a, const Get &get, Sums &s) {
    int64_t row_error = 0;   // |e| <= 2^33 here, 2^16 of them fit int64
    uint64_t row_abs = 0;
    double row_relative = 0;
    for (int64_t b = m.min_operand(); b <= m.max_operand(); ++b) {
        const int64_t exact = a * b;
        const int64_t e = get(a, b) - exact;
        const uint64_t abs_e = e < 0 ? uint64_t(-e) : uint64_t(e);
        row_error += e;
        row_abs += abs_e;
        s.sum_square += uint128(abs_e) * abs_e;
        s.wrong += e != 0;
        s.worst = std::max(s.worst, abs_e);
        s.min_error = std::min(s.min_error, e);
        s.max_error = std::max(s.max_error, e);
        if (exact == 0) {
            ++s.zero_products;
        } else {
            const double relative = double(abs_e) / double(exact < 0 ? -exact : exact);
            row_relative += relative;
            s.worst_relative = std::max(s.worst_relative, relative);
        }
    }
    s.sum_error += row_error;
    s.sum_abs += row_abs;
    return row_relative;
}

// Calls body(a, get) per first operand a, in parallel when the model is wide.
template <class Body>
void for_each_row(const Multiplier &m, const Body &body) {
    const int64_t rows = int64_t{1} << m.bits();
    const int threads = m.bits() <= kMaxTabulatedBits ? 1 : num_threads();
    if (m.has_table()) {
        const int32_t *table = m.table().data();
        const int bits = m.bits();
        const uint32_t mask = m.operand_mask();
        auto get = [=](int64_t a, int64_t b) -> int64_t {
            return table[(uint32_t(a) & mask) << bits | (uint32_t(b) & mask)];
        };
        kernels::parallel_for(rows, threads, [&](int64_t i, int t) { body(m.min_operand() + i, t, get); });
    } else {
        auto get = [&m](int64_t a, int64_t b) { return m.product(a, b); };
        kernels::parallel_for(rows, threads, [&](int64_t i, int t) { body(m.min_operand() + i, t, get); });
    }
}

}  // namespace

approxmul_metrics metrics(const Multiplier &m) {
    const int threads = std::max(1, num_threads());
    std::vector<Sums> partial(size_t(threads) + 1);
    std::vector<double> row_relative(size_t{1} << m.bits());
    for_each_row(m, [&](int64_t a, int thread, const auto &get) {
        row_relative[size_t(a - m.min_operand())] = scan_row(m, a, get, partial[size_t(thread)]);
    });
    Sums s;
    for (const Sums &p : partial) s.add(p);
    double sum_relative = 0;
    for (double r : row_relative) sum_relative += r;

    // pairs = 4^bits is a power of two, so each mean is one exact scaling of
    // the correctly rounded sum (long double is avoided: valgrind and some
    // platforms compute it in plain double precision anyway).
    const int pair_bits = 2 * m.bits();
    const double pairs = std::ldexp(1.0, pair_bits);
    const double bias = std::ldexp(double(s.sum_error), -pair_bits);
    const double mse = std::ldexp(double(s.sum_square), -pair_bits);
    approxmul_metrics out{};
    out.pairs = int64_t{1} << pair_bits;
    out.mae = std::ldexp(double(s.sum_abs), -pair_bits);
    out.mae_percent = 100.0 * out.mae / pairs;
    out.mse = mse;
    out.wce = double(s.worst);
    out.wce_percent = 100.0 * out.wce / pairs;
    out.wcre_percent = 100.0 * s.worst_relative;
    const int64_t nonzero = out.pairs - s.zero_products;
    out.mre_percent = nonzero ? 100.0 * sum_relative / double(nonzero) : 0.0;
    out.ep_percent = 100.0 * double(s.wrong) / pairs;
    out.bias = bias;
    out.error_std = std::sqrt(std::max(0.0, mse - bias * bias));
    out.min_error = s.min_error;
    out.max_error = s.max_error;
    out.zero_product_pairs = s.zero_products;
    return out;
}

void product_table(const Multiplier &m, int32_t *out) {
    const int bits = m.bits();
    const uint32_t mask = m.operand_mask();
    for_each_row(m, [&](int64_t a, int, const auto &get) {
        int32_t *row = out + (size_t(uint32_t(a) & mask) << bits);
        for (int64_t b = m.min_operand(); b <= m.max_operand(); ++b) {
            const int64_t p = get(a, b);
            if (p < INT32_MIN || p > INT32_MAX)
                fail(APPROXMUL_ERR_OVERFLOW, "product of %lld and %lld is %lld, outside the "
                     "int32 table range", static_cast<long long>(a), static_cast<long long>(b),
                     static_cast<long long>(p));
            row[uint32_t(b) & mask] = static_cast<int32_t>(p);
        }
    });
}

void error_map(const Multiplier &m, int64_t *out) {
    const int bits = m.bits();
    const uint32_t mask = m.operand_mask();
    for_each_row(m, [&](int64_t a, int, const auto &get) {
        int64_t *row = out + (size_t(uint32_t(a) & mask) << bits);
        for (int64_t b = m.min_operand(); b <= m.max_operand(); ++b)
            row[uint32_t(b) & mask] = get(a, b) - a * b;
    });
}

}  // namespace approxmul::library
