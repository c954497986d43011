// Built-in multiplier families and the spec-string parser.
//
// Every family is an unsigned design U(a, b) on operand magnitudes. Signed
// array designs (truncated, bam) break the Baugh-Wooley array; the others
// take the sign-magnitude form P = sign(a) sign(b) U(|a|, |b|), with
// |-2^(n-1)| = 2^(n-1) as an n-bit unsigned value. Products are int64: signed DRUM with k = 2 can exceed the
// 2n-bit signed range (n = 8: -128 * -128 -> 36864) and is reported as is.
// Definitions and worked examples: docs/multipliers.md.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

#include "../core/error.hpp"
#include "../kernels/isa.hpp"
#include "library.hpp"

namespace approxmul::library {
namespace {

inline int lod(uint64_t x) { return 63 - __builtin_clzll(x); }  // x > 0
inline uint64_t low_bits(uint64_t x, int count) {
    return count <= 0 ? 0 : count >= 63 ? x : x & ((uint64_t{1} << count) - 1);
}
inline uint64_t magnitude(int64_t x) { return x < 0 ? uint64_t(-x) : uint64_t(x); }

// ---- the designs, on unsigned magnitudes

// Partial-product bits a_i b_j (row j = bit of b, column i + j) removed by
// a broken array: rows j < hbl, and cells in columns i + j < vbl.
inline uint64_t broken_array_dropped(uint64_t a, uint64_t b, int n, int hbl, int vbl) {
    uint64_t dropped = 0;
    for (int j = 0; j < n && (j < hbl || j < vbl); ++j)
        if ((b >> j) & 1) dropped += (j < hbl ? a : low_bits(a, vbl - j)) << j;
    return dropped;
}

// The same break on the Baugh-Wooley array of signed operands (a, b as
// n-bit patterns): cells with exactly one sign bit are NAND instead of AND,
// plus constant ones in columns n and 2n-1; the exact sum of all of it is
// a*b mod 2^(2n). Returns the value of the removed cells (constants apart).
inline uint64_t baugh_wooley_dropped(uint64_t a, uint64_t b, int n, int hbl, int vbl) {
    const uint64_t all = (uint64_t{1} << n) - 1, top = uint64_t{1} << (n - 1);
    uint64_t dropped = 0;
    for (int j = 0; j < n && (j < hbl || j < vbl); ++j) {
        const uint64_t removed = j < hbl ? all : low_bits(all, vbl - j);
        const bool bj = (b >> j) & 1;
        const uint64_t nand_cells = j == n - 1 ? removed & ~top : removed & top;
        const uint64_t and_cells = removed & ~nand_cells;
        dropped += ((bj ? a & and_cells : 0) + (bj ? ~a & nand_cells : nand_cells)) << j;
    }
    return dropped;
}

// Constant ones of the Baugh-Wooley array in columns below vbl are removed too.
inline uint64_t baugh_wooley_constants_dropped(int n, int vbl) {
    return (n < vbl ? uint64_t{1} << n : 0) + (2 * n - 1 < vbl ? uint64_t{1} << (2 * n - 1) : 0);
}

inline int64_t wrap_signed(int64_t value, int width) {  // value mod 2^width, two's complement
    const uint64_t mask = (uint64_t{1} << width) - 1, low = uint64_t(value) & mask;
    return low >> (width - 1) ? int64_t(low) - int64_t(mask) - 1 : int64_t(low);
}

// DRUM / DSM segment: operands below 2^k are exact; otherwise keep the k
// bits from the leading one (DRUM also forces the segment's LSB to 1).
inline uint64_t segment(uint64_t x, int k, bool unbiased) {
    if (x < (uint64_t{1} << k)) return x;
    const int shift = lod(x) - k + 1;
    return ((x >> shift) | (unbiased ? 1 : 0)) << shift;
}

// Mitchell: log2 x ~ k + f, antilog 2^f ~ 1 + f; bit-exact integer form.
inline int64_t mitchell(uint64_t a, uint64_t b) {
    if (a == 0 || b == 0) return 0;
    const int k1 = lod(a), k2 = lod(b);
    const uint64_t s = ((a - (uint64_t{1} << k1)) << k2) + ((b - (uint64_t{1} << k2)) << k1);
    return int64_t(s < (uint64_t{1} << (k1 + k2)) ? (uint64_t{1} << (k1 + k2)) + s : 2 * s);
}

// ILM: 2^(k1+k2) + x1 2^k2 + x2 2^k1 drops x1 x2; each iteration
// approximates that dropped term the same way.
inline int64_t ilm(uint64_t a, uint64_t b, int iterations) {
    uint64_t sum = 0;
    for (int round = 0; a != 0 && b != 0 && round <= iterations; ++round) {
        const int k1 = lod(a), k2 = lod(b);
        const uint64_t x1 = a - (uint64_t{1} << k1), x2 = b - (uint64_t{1} << k2);
        sum += (uint64_t{1} << (k1 + k2)) + (x1 << k2) + (x2 << k1);
        a = x1;
        b = x2;
    }
    return int64_t(sum);
}

// RoBA: operands rounded to the nearest power of two (ties up),
// A*B ~ Ar*B + A*Br - Ar*Br, dropping (A - Ar)(B - Br).
inline int64_t roba_round(uint64_t x) {
    if (x <= 1) return int64_t(x);
    const int p = lod(x);
    return int64_t(1) << (p + ((x >> (p - 1)) & 1));
}
inline int64_t roba(uint64_t a, uint64_t b) {
    const int64_t ar = roba_round(a), br = roba_round(b);
    return ar * int64_t(b) + int64_t(a) * br - ar * br;
}

// ---- sign handling and factorizations

template <class Core>
Multiplier::ProductFunction sign_magnitude(Core core, bool is_signed) {
    if (!is_signed) return [core](int64_t a, int64_t b) { return core(uint64_t(a), uint64_t(b)); };
    return [core](int64_t a, int64_t b) {
        const int64_t p = core(magnitude(a), magnitude(b));
        return (a < 0) != (b < 0) ? -p : p;
    };
}

// The operand value of a raw n-bit pattern (factors are indexed by pattern).
inline int64_t pattern_value(int64_t pattern, int bits, bool is_signed) {
    const int64_t side = int64_t{1} << bits;
    return is_signed && pattern >= side / 2 ? pattern - side : pattern;
}

// Rank 1, u = v = f: for designs that approximate each operand on its own.
template <class PerOperand>
Factorization rank_one(int bits, bool is_signed, PerOperand f) {
    Factorization fz;
    fz.rank = 1;
    const int64_t side = int64_t{1} << bits;
    fz.u.resize(size_t(side));
    for (int64_t pattern = 0; pattern < side; ++pattern) {
        const int64_t value = pattern_value(pattern, bits, is_signed);
        const int64_t g = int64_t(f(magnitude(value)));
        fz.u[size_t(pattern)] = value < 0 ? -g : g;
    }
    fz.v = fz.u;
    return fz;
}

// RoBA is bilinear: Ar B + A Br - Ar Br = Ar B + (A - Ar) Br, and signed
// (S-RoBA, sign-magnitude) with r(x) = sign(x) round(|x|), rank_one's
// factor of the rounding: u = (r(a), a - r(a)), v = (b, r(b)).
Factorization roba_factorization(int bits, bool is_signed) {
    const std::vector<int64_t> r = rank_one(bits, is_signed, roba_round).u;
    Factorization fz;
    fz.rank = 2;
    fz.u = r;
    for (int64_t pattern = 0; pattern < int64_t(r.size()); ++pattern) {
        const int64_t x = pattern_value(pattern, bits, is_signed);
        fz.u.push_back(x - r[size_t(pattern)]);
        fz.v.push_back(x);
    }
    fz.v.insert(fz.v.end(), r.begin(), r.end());
    return fz;
}

// Unsigned broken array plus a constant:
// M = a*b - sum_{rows j with drops} dropped_j(a) * (b_j 2^j) + C * 1.
Factorization broken_array_factorization(int bits, int hbl, int vbl, int64_t constant) {
    const int64_t side = int64_t{1} << bits;
    std::vector<std::vector<int64_t>> us, vs;
    auto term = [&](auto u_of, auto v_of) {
        std::vector<int64_t> u(static_cast<size_t>(side)), v(static_cast<size_t>(side));
        for (int64_t x = 0; x < side; ++x) {
            u[size_t(x)] = u_of(uint64_t(x));
            v[size_t(x)] = v_of(uint64_t(x));
        }
        us.push_back(std::move(u));
        vs.push_back(std::move(v));
    };
    term([](uint64_t a) { return int64_t(a); }, [](uint64_t b) { return int64_t(b); });
    for (int j = 0; j < bits && (j < hbl || j < vbl); ++j)
        term([=](uint64_t a) { return -int64_t(j < hbl ? a : low_bits(a, vbl - j)); },
             [=](uint64_t b) { return int64_t(((b >> j) & 1) << j); });
    if (constant != 0)
        term([=](uint64_t) { return constant; }, [](uint64_t) { return int64_t{1}; });
    Factorization fz;
    fz.rank = int(us.size());
    for (size_t r = 0; r < us.size(); ++r) {
        fz.u.insert(fz.u.end(), us[r].begin(), us[r].end());
        fz.v.insert(fz.v.end(), vs[r].begin(), vs[r].end());
    }
    return fz;
}

// ---- the family table

struct Param {
    const char *name;
    int64_t fallback;  // the default, capped at hi(bits) ("k=4": min(4, bits)); -1: bits
    int64_t lo;
    int64_t (*hi)(int64_t bits);
    const char *hi_text;
};

int64_t hi_bits(int64_t bits) { return bits; }
int64_t hi_row(int64_t bits) { return bits - 1; }
int64_t hi_cut(int64_t bits) { return 2 * bits - 1; }
int64_t hi_one(int64_t) { return 1; }
int64_t hi_width(int64_t) { return kMaxBits; }

using Values = std::map<std::string, int64_t>;
using Builder = std::shared_ptr<const Multiplier> (*)(const Values &);

struct Family {
    const char *name;
    std::vector<Param> params;
    const char *description;
    Builder build;
};

const Param kBits{"bits", 8, 2, hi_width, "16"};
const Param kSigned{"signed", 0, 0, hi_one, "1"};

int bits_of(const Values &v) { return int(v.at("bits")); }
bool signed_of(const Values &v) { return v.at("signed") != 0; }

std::shared_ptr<const Multiplier> build_exact(const Values &v) {
    return Multiplier::exact(bits_of(v), signed_of(v));
}

// Whether a signed broken array's a b - dropped - constants + constant
// stays within 2n bits for every operand pair (every dropped cell a one at
// worst): then nothing wraps, and its error is a sum over the dropped cells,
// each a function of one bit of a and one of b.
bool baugh_wooley_never_wraps(int n, int hbl, int vbl, int64_t constant) {
    const uint64_t all = (uint64_t{1} << n) - 1;
    uint64_t dropped = 0;
    for (int j = 0; j < n && (j < hbl || j < vbl); ++j)
        dropped += (j < hbl ? all : low_bits(all, vbl - j)) << j;
    const int64_t half = int64_t{1} << (2 * n - 1), quarter = half / 2;
    const int64_t lowest = -quarter + (int64_t{1} << (n - 1)) - int64_t(dropped) -
                           int64_t(baugh_wooley_constants_dropped(n, vbl)) + std::min<int64_t>(constant, 0);
    const int64_t highest = quarter + std::max<int64_t>(constant, 0);
    return lowest >= -half && highest < half;
}

std::shared_ptr<const Multiplier> build_bam(const Values &v, int hbl, int vbl, int64_t constant,
                                            const char *name) {
    const int n = bits_of(v);
    // each dropped bit is a function of one bit of a and one of b, so the
    // error is a sum of functions of one byte of each (also in Baugh-Wooley
    // form, whose inverted cells are such functions too, as long as the sum
    // does not wrap): the exact GEMM plus a table GEMM for each byte pair
    // that loses bits
    auto byte_pairs = [&](std::shared_ptr<const Multiplier> m) {
        return n > 8 ? Multiplier::with_byte_pair_errors(std::move(m)) : m;
    };
    if (signed_of(v)) {  // no factorization: the mod 2^(2n) wrap is not a sum of products
        const uint64_t mask = (uint64_t{1} << n) - 1;
        const int64_t constants = int64_t(baugh_wooley_constants_dropped(n, vbl));
        auto product = [=](int64_t a, int64_t b) {
            const int64_t dropped =
                int64_t(baugh_wooley_dropped(uint64_t(a) & mask, uint64_t(b) & mask, n, hbl, vbl));
            return wrap_signed(a * b - dropped - constants + constant, 2 * n);
        };
        auto m = Multiplier::from_function(product, n, true, name);
        return baugh_wooley_never_wraps(n, hbl, vbl, constant) ? byte_pairs(std::move(m)) : m;
    }
    auto f = [n, hbl, vbl, constant](uint64_t a, uint64_t b) {
        return int64_t(a * b - broken_array_dropped(a, b, n, hbl, vbl)) + constant;
    };
    return byte_pairs(Multiplier::from_function(sign_magnitude(f, false), n, false, name,
                                                broken_array_factorization(n, hbl, vbl, constant)));
}

std::shared_ptr<const Multiplier> build_truncated(const Values &v) {
    const int cut = int(v.at("cut"));
    const int64_t c = v.at("correct") ? truncation_correction(bits_of(v), cut, signed_of(v)) : 0;
    return build_bam(v, 0, cut, c, "truncated");
}

std::shared_ptr<const Multiplier> build_broken_array(const Values &v) {
    return build_bam(v, int(v.at("hbl")), int(v.at("vbl")), 0, "bam");
}

template <bool Unbiased>
std::shared_ptr<const Multiplier> build_segmented(const Values &v) {
    const int k = int(v.at(Unbiased ? "k" : "m"));
    auto seg = [k](uint64_t x) { return segment(x, k, Unbiased); };
    auto f = [seg](uint64_t a, uint64_t b) { return int64_t(seg(a) * seg(b)); };
    return Multiplier::from_function(sign_magnitude(f, signed_of(v)), bits_of(v), signed_of(v),
                                     Unbiased ? "drum" : "dsm",
                                     rank_one(bits_of(v), signed_of(v), seg));
}

// A wide logarithmic model (no table, no factorization: the max of
// Mitchell and ILM's stops are not bilinear) whose GEMM blocks run the
// formula in vector lanes (isa.hpp, log_block); ilm_rounds 0 is Mitchell.
std::shared_ptr<const Multiplier> with_log_lanes(std::shared_ptr<const Multiplier> m,
                                                 int ilm_rounds) {
    if (m->has_table()) return m;
    return Multiplier::with_block_function(
        std::move(m), [ilm_rounds](int64_t ni, int64_t nk, int64_t nj, const int64_t *a,
                                   int64_t a_stride, const int64_t *b, int64_t b_stride,
                                   int64_t *acc, int64_t acc_stride) {
            thread_local std::vector<int64_t> work;
            work.resize(size_t((1 + 3 * std::max(1, ilm_rounds)) * nj));
            kernels::selected_kernels().log_block(ni, nk, nj, a, a_stride, b, b_stride,
                                                  ilm_rounds, acc, acc_stride, work.data());
        });
}

std::shared_ptr<const Multiplier> build_mitchell(const Values &v) {
    return with_log_lanes(Multiplier::from_function(sign_magnitude(mitchell, signed_of(v)),
                                                    bits_of(v), signed_of(v), "mitchell"),
                          0);
}

std::shared_ptr<const Multiplier> build_ilm(const Values &v) {
    const int iterations = int(v.at("iterations"));
    auto f = [iterations](uint64_t a, uint64_t b) { return ilm(a, b, iterations); };
    return with_log_lanes(Multiplier::from_function(sign_magnitude(f, signed_of(v)), bits_of(v),
                                                    signed_of(v), "ilm"),
                          iterations + 1);
}

// Wide models get RoBA's factorization (rank 2, byte-split GEMMs); 8-bit
// tables keep the one the plan finds in them.
std::shared_ptr<const Multiplier> build_roba(const Values &v) {
    const int n = bits_of(v);
    return Multiplier::from_function(sign_magnitude(roba, signed_of(v)), n, signed_of(v), "roba",
                                     n > kMaxTabulatedBits ? roba_factorization(n, signed_of(v))
                                                           : Factorization{});
}

const std::vector<Family> &families() {
    static const std::vector<Family> table = {
        {"exact", {{"bits", 8, 1, hi_width, "16"}, kSigned}, "the exact product a*b", build_exact},
        {"truncated",
         {kBits, kSigned, {"cut", -1, 0, hi_cut, "2*bits-1"}, {"correct", 0, 0, hi_one, "1"}},
         "column-truncated array multiplier: partial-product bits in columns below cut "
         "removed (signed: of the Baugh-Wooley array); correct=1 adds round-half-up(E), E the "
         "expected value of the removed bits (Schulte & Swartzlander, IEEE VLSI Signal "
         "Processing 1993)",
         build_truncated},
        {"bam",
         {kBits, kSigned, {"hbl", 0, 0, hi_row, "bits-1"}, {"vbl", 0, 0, hi_cut, "2*bits-1"}},
         "broken-array multiplier: keeps a_i b_j iff j >= hbl and i + j >= vbl (signed: on the "
         "Baugh-Wooley array) (Mahdiani et al., IEEE TCAS-I 57(4), 2010)",
         build_broken_array},
        {"drum",
         {kBits, kSigned, {"k", 4, 2, hi_bits, "bits"}},
         "DRUM(k): k bits from the leading one, segment LSB forced to 1, operands below 2^k "
         "exact (Hashemi, Bahar & Reda, ICCAD 2015)",
         build_segmented<true>},
        {"dsm",
         {kBits, kSigned, {"m", 4, 2, hi_bits, "bits"}},
         "dynamic segment method DSM(m): m bits from the leading one, truncated (Narayanamoorthy "
         "et al., IEEE TVLSI 23(6), 2015)",
         build_segmented<false>},
        {"mitchell",
         {kBits, kSigned},
         "Mitchell's logarithmic multiplier, all fraction bits kept (Mitchell, IRE Trans. "
         "Electronic Computers EC-11(4), 1962)",
         build_mitchell},
        {"ilm",
         {kBits, kSigned, {"iterations", 1, 0, hi_bits, "bits"}},
         "iterative logarithmic multiplier with error-correction iterations (Babic, Avramovic & "
         "Bulic, Microprocessors and Microsystems 35(1), 2011)",
         build_ilm},
        {"roba",
         {kBits, kSigned},
         "rounding-based multiplier RoBA, operands rounded to powers of two with ties up, signed "
         "as S-RoBA (Zendegani et al., IEEE TVLSI 25(2), 2017)",
         build_roba},
    };
    return table;
}

std::string parameter_text(const Family &family) {
    std::string text;
    for (const Param &p : family.params) {
        if (!text.empty()) text += ", ";
        text += std::string(p.name) + "=" + (p.fallback < 0 ? "bits" : std::to_string(p.fallback)) + " (" +
                std::to_string(p.lo) + ".." + p.hi_text + ")";
    }
    return text;
}

std::string family_names() {
    std::string names;
    for (const Family &f : families()) names += (names.empty() ? "" : ", ") + std::string(f.name);
    return names;
}

std::string trim(const std::string &s) {
    const size_t first = s.find_first_not_of(" \t");
    if (first == std::string::npos) return "";
    return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

int64_t parse_value(const std::string &family, const std::string &key, const std::string &text) {
    if (text == "true") return 1;
    if (text == "false") return 0;
    char *end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "%s: %s=%s is not an integer", family.c_str(),
             key.c_str(), text.c_str());
    return value;
}

}  // namespace

// Constant correction of column truncation: the expected value of the
// removed bits for uniform operands (an AND cell is 1 with probability 1/4,
// a NAND cell 3/4, a constant always), rounded half up to an integer and
// added to the full 2n-bit result.
int64_t truncation_correction(int bits, int cut, bool is_signed) {
    int64_t quarter_units = 0;  // 4 * expected value
    for (int i = 0; i < bits; ++i)
        for (int j = 0; j < bits && i + j < cut; ++j) {
            const bool nand = is_signed && ((i == bits - 1) != (j == bits - 1));
            quarter_units += int64_t(nand ? 3 : 1) << (i + j);
        }
    if (is_signed) quarter_units += 4 * int64_t(baugh_wooley_constants_dropped(bits, cut));
    return (quarter_units + 2) / 4;
}

const std::vector<FamilyInfo> &family_infos() {
    static const std::vector<FamilyInfo> infos = [] {
        std::vector<FamilyInfo> out;
        for (const Family &f : families()) out.push_back({f.name, parameter_text(f), f.description});
        return out;
    }();
    return infos;
}

std::shared_ptr<const Multiplier> from_spec(const std::string &spec) {
    const size_t colon = spec.find(':');
    const std::string name = trim(spec.substr(0, colon));
    const Family *family = nullptr;
    for (const Family &f : families())
        if (name == f.name) family = &f;
    if (family == nullptr)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT,
             "unknown multiplier family '%s' in spec '%s'; valid families: %s (a spec is "
             "family[:key=value,...])",
             name.c_str(), spec.c_str(), family_names().c_str());
    const std::string params = parameter_text(*family);

    Values values;
    const std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
    size_t start = 0;
    while (colon != std::string::npos && start <= rest.size()) {
        const size_t comma = std::min(rest.find(',', start), rest.size());
        const std::string item = trim(rest.substr(start, comma - start));
        start = comma + 1;
        if (item.empty()) {
            if (rest.find_first_not_of(" \t") == std::string::npos) break;  // "mitchell:"
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "%s: empty parameter in '%s'", name.c_str(),
                 spec.c_str());
        }
        const size_t eq = item.find('=');
        const std::string key = trim(item.substr(0, eq));
        bool known = false;
        for (const Param &p : family->params) known = known || key == p.name;
        if (!known)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "%s: unknown parameter '%s'; parameters: %s",
                 name.c_str(), key.c_str(), params.c_str());
        if (eq == std::string::npos)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "%s: parameter '%s' needs a value (%s=...)",
                 name.c_str(), key.c_str(), key.c_str());
        if (values.count(key))
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "%s: parameter '%s' given twice", name.c_str(),
                 key.c_str());
        values[key] = parse_value(name, key, trim(item.substr(eq + 1)));
    }
    // bits first: the other ranges depend on it
    std::string canonical = name;
    for (const Param &p : family->params) {
        const auto found = values.find(p.name);
        const int64_t hi = p.hi(values.count("bits") ? values["bits"] : 8);
        const int64_t bits = values.count("bits") ? values["bits"] : 8;
        const int64_t fallback = p.fallback < 0 ? bits : std::min(p.fallback, hi);
        const int64_t value = found == values.end() ? fallback : found->second;
        if (value < p.lo || value > hi) {
            fail(APPROXMUL_ERR_INVALID_ARGUMENT,
                 "%s: %s=%lld is outside %lld..%lld; parameters: %s", name.c_str(), p.name,
                 static_cast<long long>(value), static_cast<long long>(p.lo),
                 static_cast<long long>(hi), params.c_str());
        }
        values[p.name] = value;
        canonical += (canonical == name ? ":" : ",") + std::string(p.name) + "=" +
                     std::to_string(value);
    }
    return Multiplier::with_spec(family->build(values), canonical);
}

}  // namespace approxmul::library
