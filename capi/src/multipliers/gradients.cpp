// Derivatives of a multiplier's product table, for training through it:
// smoothed central differences (2-D) and least-squares slopes (1-D).
// Definitions: approxmul.h and docs/retraining.md. Everything is computed
// in double from exact integer products; no result depends on threads.
#include <algorithm>

#include "library.hpp"

namespace approxmul::library {
namespace {

// M(a, b) with the differentiated operand first: operand B swaps the roles.
struct Oriented {
    const Multiplier &m;
    bool along_b;
    int64_t operator()(int64_t t, int64_t other) const {
        return along_b ? m.product(other, t) : m.product(t, other);
    }
};

size_t pattern(const Multiplier &m, int64_t value) {
    return static_cast<uint32_t>(value) & m.operand_mask();
}

}  // namespace

void gradient_table(const Multiplier &m, bool along_b, int half_window, double *out) {
    const Oriented get{m, along_b};
    const int64_t lo_v = m.min_operand(), hi_v = m.max_operand();
    const size_t side = size_t{1} << m.bits();
    for (int64_t t = lo_v; t <= hi_v; ++t) {
        const int64_t lo = std::max(t - half_window, lo_v), hi = std::min(t + half_window, hi_v);
        const double span = double(hi - lo);
        for (int64_t other = lo_v; other <= hi_v; ++other) {
            const double d = span > 0 ? double(get(hi, other) - get(lo, other)) / span : 0.0;
            const size_t row = pattern(m, along_b ? other : t), col = pattern(m, along_b ? t : other);
            out[row * side + col] = d;
        }
    }
}

void gradient_slopes(const Multiplier &m, bool along_b, double *out) {
    const Oriented get{m, along_b};
    const int64_t lo_v = m.min_operand(), hi_v = m.max_operand();
    const double n = double(hi_v - lo_v + 1);
    const double mean_t = double(lo_v + hi_v) / 2;
    double sxx = 0;
    for (int64_t t = lo_v; t <= hi_v; ++t) sxx += (double(t) - mean_t) * (double(t) - mean_t);
    for (int64_t other = lo_v; other <= hi_v; ++other) {
        // sum (t - mean_t)(M - mean_M) = sum (t - mean_t) M: the mean term vanishes
        double sxy = 0;
        for (int64_t t = lo_v; t <= hi_v; ++t) sxy += (double(t) - mean_t) * double(get(t, other));
        out[pattern(m, other)] = n > 1 ? sxy / sxx : 0.0;
    }
}

}  // namespace approxmul::library
