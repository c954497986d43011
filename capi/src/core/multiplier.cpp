#include "multiplier.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "../kernels/kernels.hpp"  // the plan weighs the selected kernels
#include "error.hpp"
#include "structure.hpp"

namespace approxmul {

const char *plan_name(Plan plan) {
    switch (plan) {
    case Plan::ExactGemm: return "exact-gemm";
    case Plan::Factorized: return "factorized-gemm";
    case Plan::Table: return "table";
    case Plan::ExactPlusTable: return "exact-plus-table";
    case Plan::Function: return "function";
    }
    return "unknown";
}

namespace {

// Whether a factorization with int16 factors of an up-to-8-bit model fits
// the byte GEMM in either orientation (kernels::fit_u8_factors).
bool fits_byte_gemm(const Factorization &f, int bits) {
    if (bits > 8) return false;
    Int16Factors g;
    g.rank = f.rank;
    g.u.assign(f.u.begin(), f.u.end());  // fits int16: fits_int16_kernels said so
    g.v.assign(f.v.begin(), f.v.end());
    const auto fits = kernels::fit_u8_factors(g, bits);
    return fits[0].found || fits[1].found;
}

}  // namespace

void check_width(int bits, int max_bits) {
    if (bits < 1 || bits > max_bits)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "bits: %d is not an operand width in 1..%d", bits,
             max_bits);
}

Multiplier::Multiplier(int bits, bool is_signed, std::string name)
    : bits_(bits), is_signed_(is_signed), name_(std::move(name)) {}

int64_t Multiplier::max_abs_product() const {
    // |INT64_MIN| is not representable, but products stay far below it
    return std::max(max_product_, -min_product_);
}

std::shared_ptr<const Multiplier> Multiplier::from_table(std::vector<int32_t> table, int bits,
                                                          bool is_signed, std::string name) {
    return tabulated(std::move(table), bits, is_signed, std::move(name), false);
}

std::shared_ptr<const Multiplier> Multiplier::tabulated(std::vector<int32_t> table, int bits,
                                                        bool is_signed, std::string name,
                                                        bool table_plan_only) {
    check_width(bits, kMaxTableBits);
    const size_t expected = size_t{1} << (2 * bits);
    if (table.size() != expected)
        fail(APPROXMUL_ERR_SHAPE, "table: %zu entries given, a %d-bit table has 4^%d = %zu",
             table.size(), bits, bits, expected);
    std::shared_ptr<Multiplier> m(new Multiplier(bits, is_signed, std::move(name)));
    m->table_ = std::move(table);
    m->table_plan_only_ = table_plan_only;
    m->finish();
    return m;
}

std::shared_ptr<const Multiplier> Multiplier::from_function(ProductFunction function, int bits,
                                                             bool is_signed, std::string name,
                                                             Factorization factorization) {
    check_width(bits, kMaxBits);
    std::shared_ptr<Multiplier> m(new Multiplier(bits, is_signed, std::move(name)));
    const size_t factor_size = static_cast<size_t>(factorization.rank) << bits;
    if (factorization.rank < 0 || factorization.u.size() != factor_size ||
        factorization.v.size() != factor_size)
        fail(APPROXMUL_ERR_INTERNAL, "factorization of %s: factor sizes do not match its rank",
             m->name_.c_str());
    m->factorization_ = std::move(factorization);
    if (bits <= kMaxTabulatedBits) {
        const int64_t side = int64_t{1} << bits;
        m->table_.resize(static_cast<size_t>(side * side));
        for (int64_t a = m->min_operand(); a <= m->max_operand(); ++a)
            for (int64_t b = m->min_operand(); b <= m->max_operand(); ++b) {
                const int64_t p = function(a, b);
                if (p < std::numeric_limits<int32_t>::min() ||
                    p > std::numeric_limits<int32_t>::max())
                    fail(APPROXMUL_ERR_OVERFLOW,
                         "product of %lld and %lld is %lld, outside the int32 table range",
                         static_cast<long long>(a), static_cast<long long>(b),
                         static_cast<long long>(p));
                m->table_[(static_cast<uint32_t>(a) & m->operand_mask()) << bits |
                          (static_cast<uint32_t>(b) & m->operand_mask())] =
                    static_cast<int32_t>(p);
            }
    } else {
        m->function_ = std::move(function);
    }
    m->finish();
    return m;
}

std::shared_ptr<const Multiplier> Multiplier::exact(int bits, bool is_signed) {
    check_width(bits, kMaxBits);
    auto m = from_function([](int64_t a, int64_t b) { return a * b; }, bits, is_signed, "exact");
    auto *mutable_m = const_cast<Multiplier *>(m.get());
    mutable_m->known_exact_ = true;
    mutable_m->finish();
    return m;
}

std::shared_ptr<const Multiplier> Multiplier::with_spec(std::shared_ptr<const Multiplier> m,
                                                       std::string spec) {
    // only called before the handle is shared, so the object is still private
    const_cast<Multiplier *>(m.get())->spec_ = std::move(spec);
    return m;
}

std::shared_ptr<const Multiplier> Multiplier::with_byte_pair_errors(
    std::shared_ptr<const Multiplier> m) {
    auto *owned = const_cast<Multiplier *>(m.get());  // not shared yet
    // byte-split factors of rank >= 2 cost 4 rank int16 GEMMs through factor
    // tables, more than three byte GEMMs and a table GEMM for each byte pair
    // (16-bit BAM dropping rows: 3-6.5x faster so, docs/benchmarks.md)
    const bool split_factors = owned->plan_ == Plan::Factorized && !owned->factors_fit_int16_ &&
                               owned->factorization_.rank > 1;
    if (owned->bits_ > 8 && !owned->known_exact_ &&
        (owned->plan_ == Plan::Table || owned->plan_ == Plan::Function || split_factors) &&
        owned->take_digit_errors(8, 4) == DigitErrors::NotASum)
        fail(APPROXMUL_ERR_INTERNAL, "%s: its error is not a sum of functions of byte pairs",
             owned->name_.c_str());
    return m;
}

Multiplier::DigitErrors Multiplier::take_digit_errors(int width, size_t max_parts) {
    // a = 2^width h + x with x in [0, 2^width) and h = a >> width (signed in a
    // signed model); the error E = M - a b as F00(xa, xb) + F01(xa, hb) +
    // F10(ha, xb) + F11(ha, hb), each F fixed by differences anchored at
    // zero digits; h indexed by its pattern, (a & mask) >> width
    const int top_bits = bits_ - width;
    if (top_bits <= 0 || top_bits > width) return DigitErrors::NotASum;
    const int64_t side = int64_t{1} << width, tops = int64_t{1} << top_bits;
    auto top = [&](int64_t index) { return (is_signed_ && index >= tops / 2 ? index - tops : index) * side; };
    auto error = [&](int64_t a, int64_t b) { return product(a, b) - a * b; };
    std::vector<int64_t> x_row(size_t(side), 0), x_col(size_t(side), 0);  // E(x, 0), E(0, x)
    std::vector<int64_t> h_row(size_t(tops), 0), h_col(size_t(tops), 0);  // E(2^w h, 0), E(0, 2^w h)
    for (int64_t x = 0; x < side; ++x) x_row[size_t(x)] = error(x, 0), x_col[size_t(x)] = error(0, x);
    for (int64_t i = 0; i < tops; ++i) h_row[size_t(i)] = error(top(i), 0), h_col[size_t(i)] = error(0, top(i));
    const int64_t origin = error(0, 0);
    // parts[d] indexed [a's digit][b's digit], d = 2 (a high) + (b high)
    std::array<std::vector<int64_t>, 4> parts;
    for (auto &part : parts) part.assign(size_t(side * side), 0);
    for (int64_t i = 0; i < side; ++i)
        for (int64_t j = 0; j < side; ++j) {
            const size_t at = size_t(i * side + j);
            parts[0][at] = error(i, j);
            if (j < tops) parts[1][at] = error(i, top(j)) - x_row[size_t(i)];
            if (i < tops) parts[2][at] = error(top(i), j) - x_col[size_t(j)];
            if (i < tops && j < tops)
                parts[3][at] = error(top(i), top(j)) - h_row[size_t(i)] - h_col[size_t(j)] + origin;
        }
    auto predicted = [&](int64_t a, int64_t b) {
        const int64_t xa = a & (side - 1), xb = b & (side - 1);
        const int64_t ha = (a >> width) & (tops - 1), hb = (b >> width) & (tops - 1);
        return a * b + parts[0][size_t(xa * side + xb)] + parts[1][size_t(xa * side + hb)] +
               parts[2][size_t(ha * side + xb)] + parts[3][size_t(ha * side + hb)];
    };
    // every operand pair of a table; of a wide function model, every pair of
    // low digits under two high digits each, the extremes (unsigned: the
    // highest and a middle one, 0 being the parts' own anchor), and pairs
    // spread over the whole range: a guard against a family's wrong claim at
    // a third of a million calls (the tests check the families)
    if (has_table()) {
        for (int64_t a = min_operand(); a <= max_operand(); ++a)
            for (int64_t b = min_operand(); b <= max_operand(); ++b)
                if (product(a, b) != predicted(a, b)) return DigitErrors::NotASum;
    } else {
        const int64_t h_lo = min_operand() >> width, h_hi = max_operand() >> width;
        const int64_t highs[] = {is_signed_ ? h_lo : (h_hi + 1) / 2, h_hi};
        for (int64_t ha : highs)
            for (int64_t hb : highs)
                for (int64_t x = 0; x < side; ++x)
                    for (int64_t y = 0; y < side; ++y) {
                        const int64_t a = side * ha + x, b = side * hb + y;
                        if (product(a, b) != predicted(a, b)) return DigitErrors::NotASum;
                    }
        uint64_t state = 0;  // splitmix64: a fixed spread of pairs
        auto next_operand = [&] {
            uint64_t z = (state += 0x9e3779b97f4a7c15u);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
            return min_operand() + int64_t((z ^ (z >> 31)) & operand_mask());
        };
        for (int k = 0; k < 65536; ++k) {
            const int64_t a = next_operand(), b = next_operand();
            if (product(a, b) != predicted(a, b)) return DigitErrors::NotASum;
        }
    }
    std::vector<ErrorPart> taken;
    const uint32_t low = uint32_t(side - 1), high = operand_mask() & ~low;
    for (size_t d = 0; d < parts.size(); ++d) {
        uint64_t bits = 0;
        for (int64_t e : parts[d]) bits |= uint64_t(e);
        if (bits == 0) continue;
        int scale = 0;  // the power of two they share: 2^(i + j) of a high byte's cells
        while (((bits >> scale) & 1) == 0) ++scale;
        for (int64_t &e : parts[d]) e /= int64_t{1} << scale;
        const auto [lo, hi] = std::minmax_element(parts[d].begin(), parts[d].end());
        if (*lo < std::numeric_limits<int32_t>::min() || *hi > std::numeric_limits<int32_t>::max())
            return DigitErrors::NotASum;  // not for the table kernels
        // width 4 (5..8-bit tables): the nibble kernel takes the low nibbles alone
        if (width == 4 && d != 0) return DigitErrors::TooManyParts;
        const bool a_high = d >= 2, b_high = d % 2 == 1;
        // a low-nibble error that fits the nibble kernel runs there: its byte
        // sums beat any factorization of it (truncation with cut 2: exact plus
        // its rank-2 error as int16 GEMMs ran at half the speed of exact plus
        // the nibble kernel)
        const bool nibble_kernel = width == 4 && *hi - *lo <= 255;
        static const char *const byte_names[] = {" (low-byte error)", " (low-by-high-byte error)",
                                                 " (high-by-low-byte error)", " (high-byte error)"};
        taken.push_back(ErrorPart{a_high ? high : low, b_high ? high : low, a_high ? width : 0,
                                  b_high ? width : 0, scale,
                                  tabulated(std::vector<int32_t>(parts[d].begin(), parts[d].end()),
                                            width, false,
                                            name_ + (width == 8 ? byte_names[d] : " (low-nibble error)"),
                                            nibble_kernel)});
    }
    if (taken.size() > max_parts) return DigitErrors::TooManyParts;
    error_parts_ = std::move(taken);
    exact_part_ = exact(bits_, is_signed_);
    plan_ = Plan::ExactPlusTable;
    split_parts_ = {};
    byte_factors_ = {};
    return DigitErrors::Taken;
}

std::shared_ptr<const Multiplier> Multiplier::with_outer_function(
    std::shared_ptr<const Multiplier> m, OuterFunction outer) {
    if (m->has_table())
        fail(APPROXMUL_ERR_INTERNAL, "%s: an outer function for a tabulated model", m->name_.c_str());
    const_cast<Multiplier *>(m.get())->outer_function_ = std::move(outer);  // not shared yet
    return m;
}

std::shared_ptr<const Multiplier> Multiplier::with_dot_function(std::shared_ptr<const Multiplier> m,
                                                                DotFunction dot) {
    if (m->has_table())
        fail(APPROXMUL_ERR_INTERNAL, "%s: a dot function for a tabulated model", m->name_.c_str());
    const_cast<Multiplier *>(m.get())->dot_function_ = std::move(dot);  // not shared yet
    return m;
}

std::shared_ptr<const Multiplier> Multiplier::with_block_function(
    std::shared_ptr<const Multiplier> m, BlockFunction block) {
    if (m->has_table())
        fail(APPROXMUL_ERR_INTERNAL, "%s: a block function for a tabulated model", m->name_.c_str());
    const_cast<Multiplier *>(m.get())->block_function_ = std::move(block);  // not shared yet
    return m;
}

void Multiplier::outer_products(const int64_t *a, int64_t rows, const int64_t *b, int64_t cols,
                                int64_t *out) const {
    if (outer_function_) return outer_function_(a, rows, b, cols, out);
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = product(a[i], b[j]);
}

Multiplier::SplitParts Multiplier::make_split_parts(const Factorization &f, int bits,
                                                   bool is_signed) {
    const char *names[3] = {"low bytes of the factors", "cross bytes of the factors",
                            "high bytes of the factors"};
    std::array<Factorization, 3> parts = split_factorization(f);
    SplitParts out;
    for (size_t k = 0; k < 3; ++k) {
        // the kernels use the part's factors; its products come from them too
        auto factors = std::make_shared<const Factorization>(parts[k]);
        const uint32_t mask = (uint32_t{1} << bits) - 1;
        auto product = [factors, mask](int64_t a, int64_t b) {
            const size_t side = size_t{mask} + 1;
            int64_t sum = 0;
            for (int r = 0; r < factors->rank; ++r)
                sum += factors->u[size_t(r) * side + (static_cast<uint32_t>(a) & mask)] *
                       factors->v[size_t(r) * side + (static_cast<uint32_t>(b) & mask)];
            return sum;
        };
        out[k] = from_function(product, bits, is_signed, names[k], std::move(parts[k]));
    }
    return out;
}

void Multiplier::build_byte_factors() {
    if (factorization_.rank != 1) return;
    // offset -min f moves f into 0..65535 where its span allows
    auto moved = [](const std::vector<int64_t> &f, std::vector<uint16_t> &w, int64_t &offset) {
        const auto [lo, hi] = std::minmax_element(f.begin(), f.end());
        if (f.empty() || *hi - *lo > 65535) return false;
        offset = -*lo;
        w.resize(f.size());
        for (size_t x = 0; x < f.size(); ++x) w[x] = static_cast<uint16_t>(f[x] + offset);
        return true;
    };
    ByteFactors b;
    if (moved(factorization_.u, b.u, b.u_offset) && moved(factorization_.v, b.v, b.v_offset))
        byte_factors_ = std::move(b);
}

void Multiplier::build_int16_factors() {
    Int16Factors &f = int16_factors_;
    const size_t side = size_t{1} << bits_;
    if (plan_ == Plan::ExactGemm) {
        f.rank = 1;
        f.u.resize(side);
        for (size_t code = 0; code < side; ++code)
            f.u[code] = static_cast<int16_t>(is_signed_ && code >= side / 2 ? int64_t(code) - int64_t(side)
                                                                            : int64_t(code));
        f.v = f.u;
    } else {
        f.rank = factorization_.rank;
        f.u.assign(factorization_.u.begin(), factorization_.u.end());  // fits int16: the plan says so
        f.v.assign(factorization_.v.begin(), factorization_.v.end());
    }
    auto int16_value = [&](const std::vector<int16_t> &factor) {
        if (f.rank != 1 || bits_ != 16) return false;
        for (size_t x = 0; x < side; ++x)
            if (factor[x] != static_cast<int16_t>(x)) return false;
        return true;
    };
    f.u_is_int16_value = int16_value(f.u);
    f.v_is_int16_value = int16_value(f.v);
}

void Multiplier::finish() {
    if (has_table()) {
        auto [lo, hi] = std::minmax_element(table_.begin(), table_.end());
        min_product_ = *lo;
        max_product_ = *hi;
        // A table that equals a*b everywhere runs as an exact integer GEMM.
        bool exact = true;
        for (int64_t a = min_operand(); exact && a <= max_operand(); ++a)
            for (int64_t b = min_operand(); b <= max_operand(); ++b)
                if (product(a, b) != a * b) {
                    exact = false;
                    break;
                }
        known_exact_ = known_exact_ || exact;
    } else if (known_exact_) {
        const int64_t corners[] = {min_operand() * min_operand(), min_operand() * max_operand(),
                                   max_operand() * max_operand()};
        min_product_ = *std::min_element(std::begin(corners), std::end(corners));
        max_product_ = *std::max_element(std::begin(corners), std::end(corners));
    } else if (factorization_.rank > 0) {
        // Wide models are not scanned (2^32 pairs); an exact factorization
        // bounds every product by sum_r max|u_r| max|v_r|
        int64_t bound = 0;
        const size_t side = size_t{1} << bits_;
        for (int r = 0; r < factorization_.rank; ++r) {
            int64_t u = 0, v = 0;
            for (size_t x = 0; x < side; ++x) {
                u = std::max<int64_t>(u, std::abs(factorization_.u[size_t(r) * side + x]));
                v = std::max<int64_t>(v, std::abs(factorization_.v[size_t(r) * side + x]));
            }
            bound += u * v;
        }
        min_product_ = -bound;
        max_product_ = bound;
    } else {
        // else by the largest value a 2n-bit product can take, which the kernels then respect.
        const int64_t limit = int64_t{1} << (2 * bits_);
        min_product_ = is_signed_ ? -limit : 0;
        max_product_ = limit;
    }
    // A supplied factorization is kept for its owner; the kernels use one
    // (supplied or found in the table) only when it is cheap and fits them.
    const int max_rank = table_plan_only_ ? 0 : kernels::max_factorized_rank(bits_);
    // longer ones where their factors fit a byte GEMM on tiles
    const int byte_rank = table_plan_only_ ? 0 : kernels::max_byte_factorized_rank(bits_);
    auto runs_as_gemms = [&](const Factorization &f) {
        if (f.rank <= 0 || !fits_int16_kernels(f)) return false;
        return f.rank <= max_rank || (f.rank <= byte_rank && fits_byte_gemm(f, bits_));
    };
    const Factorization *factors = &factorization_;
    Factorization found;
    if (!known_exact_ && has_table() && !runs_as_gemms(factorization_)) {
        found = find_factorization(table_, bits_, std::max(max_rank, byte_rank),
                                   kernels::max_lattice_rank(bits_));
        if (found.rank > 0) factors = &found;
    }
    // wide models (no table kernel to lose to) whose factors exceed int16,
    // 16-bit DRUM for one, run as byte-split GEMMs rather than one function
    // call per product
    factors_fit_int16_ = runs_as_gemms(*factors);
    const bool split = bits_ > kMaxTabulatedBits && !factors_fit_int16_ &&
                       fits_split_kernels(*factors);
    const bool factorized = factors_fit_int16_ || split;
    if (factorized && factors == &found) factorization_ = std::move(found);
    if (split) {
        split_parts_ = make_split_parts(factorization_, bits_, is_signed_);
        build_byte_factors();
    }
    plan_ = known_exact_   ? Plan::ExactGemm
            : factorized   ? Plan::Factorized
            : has_table()  ? Plan::Table
                           : Plan::Function;
    // a wide table whose error lives in the low bytes (truncation given as a table)
    if (plan_ == Plan::Table && bits_ > 8) take_digit_errors(8, 4);
    if ((plan_ == Plan::ExactGemm && bits_ <= 8) || (plan_ == Plan::Factorized && factors_fit_int16_))
        build_int16_factors();
    if (int16_factors_.rank > 0 && bits_ <= 8) u8_factors_ = kernels::fit_u8_factors(int16_factors_, bits_);
    // an 8-bit table whose error lives in the low nibbles (truncation with
    // cut <= 4): the exact GEMM and a nibble-kernel GEMM beat the byte table
    // kernel, and on AVX2 also rank-2 GEMMs; on AMX tiles, factors that fit
    // bytes beat it (docs/benchmarks.md)
    const bool byte_factors = u8_factors_[0].found || u8_factors_[1].found;
    const bool nibble_wins = plan_ == Plan::Table ||
                             (plan_ == Plan::Factorized &&
                              factorization_.rank >= kernels::nibble_error_min_rank(byte_factors));
    if (nibble_wins && bits_ > 4 && bits_ <= 8 && kernels::plans_nibble_errors() &&
        take_digit_errors(4, 1) == DigitErrors::Taken) {
        int16_factors_ = Int16Factors{};  // the exact-plus-table plan has its own
        u8_factors_ = {};
    }
    if (plan_ == Plan::Table && bits_ <= kMaxTabulatedBits) {
        const auto offset = static_cast<int32_t>(min_product_);
        planes_ = approxmul::byte_planes(table_, bits_, offset, false);
        if (!planes_.empty()) planes_transposed_ = approxmul::byte_planes(table_, bits_, offset, true);
        for (const auto *src : {&planes_, &planes_transposed_}) {
            if (src->empty()) continue;
            auto &wide = src == &planes_ ? wide_ : wide_transposed_;
            wide.resize(256 * 256);
            for (size_t s = 0; s < 256; ++s)
                for (size_t x = 0; x < 256; ++x)
                    wide[s * 256 + x] = static_cast<uint16_t>((*src)[s * 512 + x] |
                                                              (*src)[s * 512 + 256 + x] << 8);
        }
    }
}

}  // namespace approxmul
