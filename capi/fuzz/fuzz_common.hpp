// Shared pieces of the libFuzzer harnesses over the C ABI (capi/fuzz).
//
// Harnesses only use the public header, like any C caller. The rules they
// check are the ABI's promises (docs/abi.md, docs/security.md):
//  - no crash and no sanitizer report, whatever the arguments;
//  - a call that fails writes nothing and leaves a message;
//  - a call that succeeds is bit-exact against an independent model here;
//  - a call whose arguments are all valid succeeds.
// Input buffers are allocated with exactly the bytes a strided view spans,
// so AddressSanitizer catches any read one element outside of it.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "approxmul.h"

namespace fuzz {

using i128 = __int128;

// Largest input buffer a harness allocates; bigger views are not called with
// real memory (they could legitimately be read by a correct library).
constexpr i128 kMaxBufferBytes = 1 << 20;
constexpr i128 kMaxWalkedElements = 1 << 20;

[[noreturn]] inline void die(const char *what, long long detail = 0) {
    std::fprintf(stderr, "fuzz check failed: %s (%lld); last error: %s\n", what, detail,
                 approxmul_last_error());
    std::abort();
}

inline void expect(bool condition, const char *what, long long detail = 0) {
    if (!condition) die(what, detail);
}

// Every status keeps the message contract: "" after success, text after failure.
inline approxmul_status checked(approxmul_status status) {
    const char *message = approxmul_last_error();
    expect(message != nullptr, "last_error returned NULL");
    if (status == APPROXMUL_OK)
        expect(message[0] == '\0', "message left after success");
    else
        expect(message[0] != '\0', "no message after failure", status);
    expect(std::strcmp(approxmul_status_string(status), "unknown status") != 0,
           "status outside the enum", status);
    return status;
}

inline size_t dtype_size(int dtype) {
    switch (dtype) {
    case APPROXMUL_INT8:
    case APPROXMUL_UINT8: return 1;
    case APPROXMUL_INT16:
    case APPROXMUL_UINT16: return 2;
    case APPROXMUL_INT32: return 4;
    case APPROXMUL_INT64: return 8;
    }
    return 0;
}

struct Model;

// Zero points (now and then one outside the width), the accumulator type the
// library reports for them, and an output dtype: sometimes an invalid value,
// sometimes int32 where int64 is needed. For matmul-like calls.
struct GemmOutput {
    int64_t a_zero = 0, b_zero = 0;
    approxmul_dtype acc = APPROXMUL_INT64;
    approxmul_status acc_status = APPROXMUL_OK;
    int c_dtype = APPROXMUL_INT64;
};
inline GemmOutput pick_gemm_output(FuzzedDataProvider &in, const Model &m, int64_t inner);

// One stored element of a known dtype, read as int64.
inline int64_t load_element(const unsigned char *p, int dtype) {
    switch (dtype) {
    case APPROXMUL_INT8: return *reinterpret_cast<const int8_t *>(p);
    case APPROXMUL_UINT8: return *p;
    case APPROXMUL_INT16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case APPROXMUL_UINT16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case APPROXMUL_INT32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case APPROXMUL_INT64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    }
    return 0;
}

// DRUM's operand rounding (Hashemi et al.), written here from the paper: k
// bits from the leading one, the last kept bit set; below 2^k unchanged.
inline int64_t drum_round(uint64_t x, int k) {
    if (x < (uint64_t{1} << k)) return static_cast<int64_t>(x);
    int length = 0;
    while (x >> length) ++length;
    const int cut = length - k;
    return static_cast<int64_t>(((x >> cut) | 1) << cut);
}

// The logarithmic families on magnitudes, written here from the papers:
// with x = 2^k (1 + f), Mitchell's 2^(k1+k2) (1 + f1 + f2) below a carry
// of the fractions, else 2^(k1+k2+1) (f1 + f2), in integers; ILM adds
// 2^(k1+k2) + m1 2^k2 + m2 2^k1 (x = 2^k + m) per round and goes on with
// the low parts m, rounds + 1 times at most; RoBA rounds each operand to the
// nearest power of two (1.5 2^p up) and keeps Ar B + A Br - Ar Br.
inline int leading_one_of(uint64_t x) {
    int k = 0;
    while (x >> (k + 1)) ++k;
    return k;
}
inline int64_t mitchell_product(uint64_t a, uint64_t b) {
    if (a == 0 || b == 0) return 0;
    const int k1 = leading_one_of(a), k2 = leading_one_of(b);
    const uint64_t f1 = a - (uint64_t{1} << k1), f2 = b - (uint64_t{1} << k2);
    const uint64_t fractions = (f1 << k2) + (f2 << k1);  // (f1 + f2) 2^(k1+k2)
    const uint64_t one = uint64_t{1} << (k1 + k2);
    return static_cast<int64_t>(fractions < one ? one + fractions : 2 * fractions);
}
inline int64_t ilm_product(uint64_t a, uint64_t b, int iterations) {
    uint64_t total = 0;
    for (int round = 0; round <= iterations && a != 0 && b != 0; ++round) {
        const int k1 = leading_one_of(a), k2 = leading_one_of(b);
        const uint64_t m1 = a - (uint64_t{1} << k1), m2 = b - (uint64_t{1} << k2);
        total += (uint64_t{1} << (k1 + k2)) + (m1 << k2) + (m2 << k1);
        a = m1;
        b = m2;
    }
    return static_cast<int64_t>(total);
}
inline int64_t roba_product(uint64_t a, uint64_t b) {
    const auto rounded = [](uint64_t x) -> int64_t {
        if (x <= 1) return static_cast<int64_t>(x);
        const int p = leading_one_of(x);
        return x >= (uint64_t{3} << (p - 1)) ? int64_t{1} << (p + 1) : int64_t{1} << p;
    };
    const int64_t ar = rounded(a), br = rounded(b);
    return ar * static_cast<int64_t>(b) + static_cast<int64_t>(a) * br - ar * br;
}

// Column truncation from the array: unsigned, the partial-product bits
// a_i b_j 2^(i+j) of columns i + j >= cut and rows j >= hbl (a broken
// array); signed, the Baugh-Wooley array's (NAND where exactly one index is
// the sign bit, constant ones in columns n and 2n - 1, each kept when its
// column is >= cut too) mod 2^(2n).
inline int64_t truncated_product(int64_t a, int64_t b, int n, int cut, int hbl, bool is_signed) {
    const uint64_t mask = (uint64_t{1} << n) - 1;
    const uint64_t pa = static_cast<uint64_t>(a) & mask, pb = static_cast<uint64_t>(b) & mask;
    uint64_t total = 0;
    if (is_signed)
        for (int column : {n, 2 * n - 1})
            if (column >= cut) total += uint64_t{1} << column;
    for (int i = 0; i < n; ++i)
        for (int j = std::max({cut - i, hbl, 0}); j < n; ++j) {
            uint64_t bit = (pa >> i) & (pb >> j) & 1;
            if (is_signed && (i == n - 1) != (j == n - 1)) bit ^= 1;
            total += bit << (i + j);
        }
    if (!is_signed) return static_cast<int64_t>(total);
    total &= (uint64_t{1} << (2 * n)) - 1;
    const int64_t value = static_cast<int64_t>(total);
    return total >> (2 * n - 1) ? value - (int64_t{1} << (2 * n)) : value;
}

// An independent model of a multiplier: the table the harness built, DRUM
// of 9-16 bits (factors beyond int16 run as byte-split GEMMs), truncation
// of 5-16 bits with cut <= 8 (at 9-16 bits the exact GEMM plus a table GEMM
// of the low bytes; at 5-8 bits cut <= 4 adds a nibble table, and cut > n
// drops the constant one of column n) or, at 9-16 bits, any cut and rows
// below hbl (a table GEMM for each byte pair with dropped cells; signed
// arrays whose sums wrap stay functions), Mitchell or ILM of 2-16 bits (wide:
// GEMM blocks in vector lanes), RoBA of 2-16 bits (wide: rank-2 byte-split
// GEMMs), or a*b. Signed log families and RoBA: sign-magnitude.
struct Model {
    int bits = 8;
    bool is_signed = false;
    std::vector<int32_t> table;  // empty: exact, or DRUM if drum_k > 0, or truncation if cut >= 0
    int drum_k = 0;
    int cut = -1;
    int hbl = 0;  // with cut: rows below it dropped too
    int log_iterations = -2;  // -1: Mitchell, >= 0: ILM with these iterations
    bool roba = false;
    approxmul_multiplier *handle = nullptr;

    int64_t min_operand() const { return is_signed ? -(int64_t{1} << (bits - 1)) : 0; }
    int64_t max_operand() const {
        return is_signed ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
    }
    bool in_range(int64_t v) const { return v >= min_operand() && v <= max_operand(); }
    int64_t product(int64_t a, int64_t b) const {
        if (!memo.empty()) {
            const uint64_t mask = (uint64_t{1} << bits) - 1;
            return memo[(static_cast<uint64_t>(a) & mask) << bits | (static_cast<uint64_t>(b) & mask)];
        }
        if (drum_k > 0) {  // signed: the magnitude rounded (|-2^(n-1)| too), the sign kept
            const auto side = [&](int64_t v) {
                const int64_t r = drum_round(static_cast<uint64_t>(v < 0 ? -v : v), drum_k);
                return v < 0 ? -r : r;
            };
            return side(a) * side(b);
        }
        if (cut >= 0) return truncated_product(a, b, bits, cut, hbl, is_signed);
        if (log_iterations >= -1 || roba) {
            const uint64_t ma = static_cast<uint64_t>(a < 0 ? -a : a);
            const uint64_t mb = static_cast<uint64_t>(b < 0 ? -b : b);
            const int64_t p = roba                 ? roba_product(ma, mb)
                              : log_iterations < 0 ? mitchell_product(ma, mb)
                                                   : ilm_product(ma, mb, log_iterations);
            return (a < 0) != (b < 0) ? -p : p;
        }
        if (table.empty()) return a * b;
        const uint64_t mask = (uint64_t{1} << bits) - 1;
        return table[(static_cast<uint64_t>(a) & mask) << bits | (static_cast<uint64_t>(b) & mask)];
    }
    // The operand storage types this multiplier accepts.
    int narrow_dtype() const {
        if (bits <= 8) return is_signed ? APPROXMUL_INT8 : APPROXMUL_UINT8;
        return is_signed ? APPROXMUL_INT16 : APPROXMUL_UINT16;
    }
    int wide_dtype() const { return is_signed ? APPROXMUL_INT16 : APPROXMUL_UINT16; }
    // Every product of an 8-bit (or narrower) model in a table, for references
    // of a million products (the truncation's model walks its partial products).
    void memoize() {
        if (bits > 8 || !memo.empty()) return;
        const int64_t side = int64_t{1} << bits;
        std::vector<int64_t> all(static_cast<size_t>(side * side));
        for (int64_t a = min_operand(); a <= max_operand(); ++a)
            for (int64_t b = min_operand(); b <= max_operand(); ++b)
                all[static_cast<size_t>((a & (side - 1)) << bits | (b & (side - 1)))] = product(a, b);
        memo = std::move(all);
    }
    std::vector<int64_t> memo;  // memoize()'s table, by bit pattern

    ~Model() { approxmul_multiplier_destroy(handle); }
};

// A multiplier from the input: exact, wide DRUM or truncation, or a table with arbitrary
// (often extreme) entries, of up to 8 bits from the input's bytes or of 9-10 from a
// generator it seeds. Returns nullptr when the input asked for an
// invalid one, after checking that the library refused it.
inline std::unique_ptr<Model> make_model(FuzzedDataProvider &in) {
    auto model = std::make_unique<Model>();
    const bool exact = in.ConsumeBool();
    model->is_signed = in.ConsumeBool();
    if (exact) {
        model->bits = in.ConsumeIntegralInRange(1, 16);
        expect(checked(approxmul_multiplier_exact(model->bits, model->is_signed,
                                                  &model->handle)) == APPROXMUL_OK,
               "exact multiplier refused", model->bits);
        return model;
    }
    const int kind = in.ConsumeIntegralInRange(0, 6);
    if (kind == 5 || kind == 6) {
        // wide half the time: only there do Mitchell and ILM run in lanes and
        // RoBA as its factors (narrow ones are tabulated)
        model->bits = in.ConsumeBool() ? in.ConsumeIntegralInRange(9, 16)
                                       : in.ConsumeIntegralInRange(2, 8);
        std::string spec;
        if (kind == 6) {
            model->roba = true;
            spec = "roba:bits=" + std::to_string(model->bits);
        } else if (in.ConsumeBool()) {
            model->log_iterations = -1;
            spec = "mitchell:bits=" + std::to_string(model->bits);
        } else {
            model->log_iterations = in.ConsumeIntegralInRange(0, model->bits);
            spec = "ilm:bits=" + std::to_string(model->bits) +
                   ",iterations=" + std::to_string(model->log_iterations);
        }
        spec += std::string(",signed=") + (model->is_signed ? "1" : "0");
        expect(checked(approxmul_multiplier_from_spec(spec.c_str(), &model->handle)) ==
                   APPROXMUL_OK,
               "logarithmic or RoBA multiplier refused", model->bits);
        return model;
    }
    if (kind == 1) {
        model->bits = in.ConsumeIntegralInRange(5, 16);
        model->cut = in.ConsumeIntegralInRange(0, 8);
        // wide arrays that drop cells in the high bytes too: any cut, rows below hbl
        if (model->bits > 8 && in.ConsumeBool()) {
            model->cut = in.ConsumeIntegralInRange(0, 2 * model->bits - 1);
            model->hbl = in.ConsumeIntegralInRange(0, model->bits - 1);
        }
        const std::string spec =
            (model->hbl > 0 ? "bam:hbl=" + std::to_string(model->hbl) + ",vbl="
                            : std::string("truncated:cut=")) +
            std::to_string(model->cut) + ",bits=" + std::to_string(model->bits) +
            ",signed=" + (model->is_signed ? "1" : "0");
        expect(checked(approxmul_multiplier_from_spec(spec.c_str(), &model->handle)) ==
                   APPROXMUL_OK,
               "truncation or broken array refused", model->bits);
        return model;
    }
    if (kind == 0) {
        // 16 bits half the time: only there do factors exceed int16; k up to
        // 12 keeps low bytes in the rounded operands
        model->bits = in.ConsumeBool() ? 16 : in.ConsumeIntegralInRange(9, 15);
        model->drum_k = in.ConsumeIntegralInRange(2, std::min(12, model->bits));
        const std::string spec = "drum:bits=" + std::to_string(model->bits) +
                                 ",k=" + std::to_string(model->drum_k) +
                                 ",signed=" + (model->is_signed ? "1" : "0");
        expect(checked(approxmul_multiplier_from_spec(spec.c_str(), &model->handle)) ==
                   APPROXMUL_OK,
               "DRUM refused", model->bits);
        return model;
    }
    model->bits = in.ConsumeIntegralInRange(1, 8);
    const int32_t extremes[] = {INT32_MIN, INT32_MAX, 0, -1, 1};
    if (model->bits == 8 && in.ConsumeBool()) {
        // 9 or 10 bits (the generic kernel's blocks sorted by code): a
        // million entries from a generator seeded by the input, extremes
        // among them
        model->bits = in.ConsumeIntegralInRange(9, 10);
        std::mt19937_64 gen(in.ConsumeIntegral<uint64_t>());
        model->table.resize(size_t{1} << (2 * model->bits));
        for (auto &entry : model->table)
            entry = gen() % 64 == 0 ? extremes[gen() % 5]
                                    : static_cast<int32_t>(int64_t(gen() % 140001) - 70000);
        expect(checked(approxmul_multiplier_from_table(model->table.data(),
                                                       static_cast<int64_t>(model->table.size()),
                                                       model->bits, model->is_signed,
                                                       &model->handle)) == APPROXMUL_OK,
               "valid wide table refused", model->bits);
        return model;
    }
    const size_t entries = size_t{1} << (2 * model->bits);
    model->table.resize(entries);
    // entries spanning at most a byte: up to 4 bits, the nibble kernel's tables
    const bool byte_span = in.ConsumeBool();
    for (auto &entry : model->table)
        entry = byte_span              ? in.ConsumeIntegralInRange<int32_t>(-100, 155)
                : in.ConsumeBool()     ? extremes[in.ConsumeIntegralInRange(0, 4)]
                                       : in.ConsumeIntegralInRange<int32_t>(-70000, 70000);
    expect(checked(approxmul_multiplier_from_table(model->table.data(),
                                                   static_cast<int64_t>(entries), model->bits,
                                                   model->is_signed, &model->handle)) ==
               APPROXMUL_OK,
           "valid table refused", model->bits);
    return model;
}

// A strided matrix view over a buffer of exactly the bytes it spans.
struct View {
    int dtype = APPROXMUL_UINT8;
    int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 0;
    std::vector<unsigned char> storage;  // resized to the exact span
    int64_t first = 0;                   // element offset of [0, 0] in storage
    bool addressable = true;             // false: the span cannot be allocated
    bool impossible = false;             // the span leaves any address space
    void *data = nullptr;

    size_t size() const { return dtype_size(dtype); }
    int64_t offset(int64_t i, int64_t j) const { return first + i * row_stride + j * col_stride; }
    int64_t get(int64_t i, int64_t j) const {
        const unsigned char *p = storage.data() + offset(i, j) * size();
        return load_element(p, dtype);
    }
    void set(int64_t i, int64_t j, int64_t value) {
        unsigned char *p = storage.data() + offset(i, j) * size();
        std::memcpy(p, &value, size());  // little-endian: the low bytes
    }
};

// Strides as a caller might pass them: row-major, column-major, reversed,
// broadcast (zero), arbitrary small, or huge.
inline int64_t pick_stride(FuzzedDataProvider &in, int64_t natural) {
    switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0: return natural;
    case 1: return -natural;
    case 2: return 0;
    case 3: return in.ConsumeIntegralInRange<int64_t>(-300, 300);
    case 4: return in.ConsumeIntegral<int64_t>();
    default: return natural * in.ConsumeIntegralInRange<int64_t>(1, 3);
    }
}

// Lays out a view, allocating its exact span when it is small enough. The
// span is computed in 128 bits; one that cannot fit a 64-bit address space
// is marked impossible and given a dummy pointer: the library must refuse it.
inline void layout(View &v, FuzzedDataProvider &in, bool column_major_natural) {
    v.row_stride = pick_stride(in, column_major_natural ? 1 : v.cols);
    v.col_stride = pick_stride(in, column_major_natural ? v.rows : 1);
    if (v.rows == 0 || v.cols == 0 || dtype_size(v.dtype) == 0) {
        v.addressable = v.rows == 0 || v.cols == 0;
        v.data = v.storage.data();
        return;
    }
    i128 low = 0, high = 0;
    for (auto [n, s] : {std::pair{v.rows, v.row_stride}, std::pair{v.cols, v.col_stride}}) {
        const i128 span = static_cast<i128>(n - 1) * s;
        (span < 0 ? low : high) += span;
    }
    const i128 bytes = (high - low + 1) * static_cast<i128>(v.size());
    v.addressable = bytes <= kMaxBufferBytes;
    if (!v.addressable) {
        static unsigned char dummy[16];
        v.data = dummy;
        // a range below address 0 or beyond the largest int64 cannot exist
        const i128 address = static_cast<i128>(reinterpret_cast<intptr_t>(v.data));
        v.impossible = address + low * static_cast<i128>(v.size()) < 0 ||
                       address + (high + 1) * static_cast<i128>(v.size()) > INT64_MAX;
        return;
    }
    v.storage.resize(static_cast<size_t>(bytes));
    v.first = static_cast<int64_t>(-low);
    v.data = v.storage.data() + v.first * v.size();
}

// Operand values from the input: in range for the model, and now and then one
// outside it when the storage type is wider than the multiplier.
inline auto fuzzed_operand(FuzzedDataProvider &in, const Model &m) {
    return [&in, &m] {
        int64_t value = in.ConsumeIntegralInRange(m.min_operand(), m.max_operand());
        if (in.ConsumeProbability<float>() < 0.002f) value = in.ConsumeIntegral<int16_t>();
        return value;
    };
}

// Sets every element of a view to next(); true when all read back in range.
template <typename Next>
bool fill_view(View &v, const Model &m, Next next) {
    bool all_in_range = true;
    for (int64_t i = 0; i < v.rows; ++i)
        for (int64_t j = 0; j < v.cols; ++j) v.set(i, j, next());
    // what the library will read back, after a zero stride repeats elements
    for (int64_t i = 0; i < v.rows; ++i)
        for (int64_t j = 0; j < v.cols; ++j) all_in_range &= m.in_range(v.get(i, j));
    return all_in_range;
}

inline bool fill_operands(View &v, FuzzedDataProvider &in, const Model &m) {
    return fill_view(v, m, fuzzed_operand(in, m));
}

// Problems for the parallel paths. The small shapes the harnesses draw never
// reach the library's threads (below 2^18 products a call runs on one, the
// byte GEMM below 2^20), so now and then a harness draws a large problem
// instead: its operands come from a generator seeded by the input (which is
// far too short to spell a million of them), the model is memoized for the
// reference, and the call runs on 2 to 4 threads.
struct Large {
    std::mt19937_64 rng;
    // products to aim at: the byte GEMM's threshold and twice it (wider
    // models' references walk their products, so a quarter of that)
    int64_t low, high;
};

inline Large pick_large(FuzzedDataProvider &in, Model &m) {
    const approxmul_status status = checked(approxmul_set_num_threads(in.ConsumeIntegralInRange(2, 4)));
    expect(status == APPROXMUL_OK, "thread count refused", status);
    m.memoize();
    const int64_t low = m.bits <= 8 ? int64_t{1} << 20 : int64_t{1} << 18;
    return Large{std::mt19937_64(in.ConsumeIntegral<uint64_t>()), low, 2 * low};
}

inline auto random_operand(Large &large, const Model &m) {
    return [&large, dist = std::uniform_int_distribution<int64_t>(m.min_operand(), m.max_operand())]()
        mutable { return dist(large.rng); };
}

// Which elements of an output view a call may write: everything else in the
// buffer must keep its sentinel.
inline std::vector<bool> touched(const View &v) {
    std::vector<bool> mask(v.storage.size() / (v.size() ? v.size() : 1), false);
    for (int64_t i = 0; i < v.rows; ++i)
        for (int64_t j = 0; j < v.cols; ++j) mask[static_cast<size_t>(v.offset(i, j))] = true;
    return mask;
}

inline bool operand_dtype_ok(int dtype, const Model &m) {
    return dtype == m.narrow_dtype() || dtype == m.wide_dtype();
}

// An operand dtype: usually one the multiplier accepts, sometimes any value.
inline int pick_operand_dtype(FuzzedDataProvider &in, const Model &m) {
    switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0: return in.ConsumeIntegralInRange(-1, 8);
    case 1: return m.wide_dtype();
    default: return m.narrow_dtype();
    }
}

// A strided tensor of up to 4 dimensions (bmm's batches, conv2d's NCHW)
// over a buffer of exactly the bytes it spans, like View.
struct Tensor {
    int dtype = APPROXMUL_UINT8;
    int ndim = 4;
    int64_t shape[4] = {1, 1, 1, 1};
    int64_t strides[4] = {0, 0, 0, 0};
    std::vector<unsigned char> storage;  // resized to the exact span
    int64_t first = 0;                   // element offset of [0, 0, 0, 0] in storage
    bool empty = false;                  // some dimension is 0 (and none negative)
    bool addressable = true;             // false: the span cannot be allocated
    bool impossible = false;             // the library must refuse the view
    i128 elements = 0;                   // logical elements (zero strides repeat storage)
    void *data = nullptr;

    size_t size() const { return dtype_size(dtype); }
    int64_t offset(const int64_t *index) const {
        int64_t o = first;
        for (int d = 0; d < ndim; ++d) o += index[d] * strides[d];
        return o;
    }
    int64_t get(const int64_t *index) const {
        const unsigned char *p = storage.data() + offset(index) * size();
        return load_element(p, dtype);
    }
    void set(const int64_t *index, int64_t value) {
        std::memcpy(storage.data() + offset(index) * size(), &value, size());
    }
    // Calls f(index) for every element, last dimension fastest.
    template <class F> void for_each(F f) const {
        if (empty || impossible) return;
        int64_t index[4] = {0, 0, 0, 0};
        for (;;) {
            f(static_cast<const int64_t *>(index));
            int d = ndim - 1;
            for (; d >= 0; --d) {
                if (++index[d] < shape[d]) break;
                index[d] = 0;
            }
            if (d < 0) return;
        }
    }
};

// Strides for a tensor: contiguous in a random dimension order, or each
// dimension picked by pick_stride (zero, negative, huge, ...).
inline void pick_strides(Tensor &t, FuzzedDataProvider &in) {
    int order[4] = {0, 1, 2, 3};
    const int mode = in.ConsumeIntegralInRange(0, 3);
    if (mode == 1)
        for (int d = t.ndim - 1; d > 0; --d) std::swap(order[d], order[in.ConsumeIntegralInRange(0, d)]);
    int64_t natural[4], step = 1;
    for (int o = t.ndim - 1; o >= 0; --o) {
        natural[order[o]] = step;
        if (__builtin_mul_overflow(step, std::max<int64_t>(t.shape[order[o]], 1), &step)) step = 1;
    }
    for (int d = 0; d < t.ndim; ++d) {
        if (natural[d] > INT64_MAX / 3) natural[d] = 1;  // pick_stride may triple it
        t.strides[d] = mode <= 1 ? natural[d] : pick_stride(in, natural[d]);
    }
}

// Allocates the exact span of a tensor whose shape and strides are set; all
// arithmetic in 128 bits, with what even that cannot hold marked impossible.
inline void allocate(Tensor &t) {
    static unsigned char dummy[16];
    t.empty = false;
    bool negative = false;
    for (int d = 0; d < t.ndim; ++d) (t.shape[d] < 0 ? negative : t.empty) |= t.shape[d] <= 0;
    if (negative) {
        t.empty = false, t.addressable = false, t.impossible = true, t.data = dummy;
        return;
    }
    if (t.empty) {
        t.data = t.storage.data();
        return;
    }
    i128 count = 1;
    for (int d = 0; d < t.ndim && count <= INT64_MAX; ++d) count *= t.shape[d];
    t.elements = count;
    if (count > INT64_MAX) {  // more elements than int64 counts
        t.addressable = false, t.impossible = true, t.data = dummy;
        return;
    }
    if (t.size() == 0) {  // invalid dtype: refused for that, whatever the pointer
        t.addressable = false, t.data = dummy;
        return;
    }
    i128 low = 0, high = 0;
    bool overflow = false;
    for (int d = 0; d < t.ndim; ++d) {
        const i128 span = static_cast<i128>(t.shape[d] - 1) * t.strides[d];
        i128 &side = span < 0 ? low : high;
        overflow |= __builtin_add_overflow(side, span, &side);
    }
    const i128 item = static_cast<i128>(t.size());
    i128 bytes = 0, low_bytes = 0, high_bytes = 0;
    overflow |= __builtin_mul_overflow(high - low + 1, item, &bytes) ||
                __builtin_mul_overflow(low, item, &low_bytes) ||
                __builtin_mul_overflow(high + 1, item, &high_bytes);
    t.addressable = !overflow && bytes <= kMaxBufferBytes;
    if (!t.addressable) {
        t.data = dummy;
        const i128 address = static_cast<i128>(reinterpret_cast<intptr_t>(t.data));
        t.impossible = overflow || address + low_bytes < 0 || address + high_bytes > INT64_MAX;
        return;
    }
    t.storage.resize(static_cast<size_t>(bytes));
    t.first = static_cast<int64_t>(-low);
    t.data = t.storage.data() + t.first * t.size();
}

// Operand values from next() (fuzzed_operand or random_operand); true when
// all are in range, as the library reads them back (zero strides repeat
// elements). A view of more elements than kMaxWalkedElements (a huge
// dimension with a zero stride over a small buffer) keeps its zeroed
// storage, in range for every model: walking it would outlast the fuzzer's
// timeout. The harnesses make such views only by breaking a shape, so the
// call must refuse them.
template <typename Next>
bool fill_tensor(Tensor &t, const Model &m, Next next) {
    if (!t.addressable || t.size() == 0) return true;
    if (t.elements > kMaxWalkedElements) return m.in_range(0);
    t.for_each([&](const int64_t *index) { t.set(index, next()); });
    bool all_in_range = true;
    t.for_each([&](const int64_t *index) { all_in_range &= m.in_range(t.get(index)); });
    return all_in_range;
}

// Output layouts the ABI promises to accept: sorted by |stride|, each
// stride steps past every element the smaller ones reach.
inline bool ordinary_output(const Tensor &t) {
    std::vector<std::pair<i128, i128>> dims;  // |stride|, size
    for (int d = 0; d < t.ndim; ++d)
        if (t.shape[d] > 1) dims.push_back({t.strides[d] < 0 ? -static_cast<i128>(t.strides[d]) : t.strides[d], t.shape[d]});
    std::sort(dims.begin(), dims.end());
    i128 reach = 0;
    for (auto [s, n] : dims) {
        if (s <= reach) return false;
        reach += s * (n - 1);
    }
    return true;
}

// Checks a successful call wrote exactly the output's elements: every other
// byte of the buffer keeps the sentinel 0x5a.
inline void expect_only_view_written(const Tensor &t) {
    std::vector<bool> mask(t.storage.size() / (t.size() ? t.size() : 1), false);
    t.for_each([&](const int64_t *index) { mask[static_cast<size_t>(t.offset(index))] = true; });
    for (size_t e = 0; e < mask.size(); ++e)
        if (!mask[e])
            for (size_t byte = 0; byte < t.size(); ++byte)
                expect(t.storage[e * t.size() + byte] == 0x5a, "wrote outside the output view");
}

// Thread counts, including invalid ones (which must be refused).
inline void pick_threads(FuzzedDataProvider &in) {
    const int threads = in.ConsumeIntegralInRange(-2, 6);
    const approxmul_status status = checked(approxmul_set_num_threads(threads));
    expect((status == APPROXMUL_OK) == (threads >= 0), "thread count status", threads);
}

inline GemmOutput pick_gemm_output(FuzzedDataProvider &in, const Model &m, int64_t inner) {
    GemmOutput g;
    if (in.ConsumeBool()) {
        g.a_zero = in.ConsumeIntegralInRange(m.min_operand() - 1, m.max_operand() + 1);
        g.b_zero = in.ConsumeIntegralInRange(m.min_operand() - 1, m.max_operand() + 1);
    }
    g.acc_status = checked(approxmul_accumulator_dtype(m.handle, inner, g.a_zero, g.b_zero, &g.acc));
    const int choice = in.ConsumeIntegralInRange(0, 7);
    g.c_dtype = choice == 0 ? in.ConsumeIntegralInRange(-1, 8)
                : choice == 1 ? APPROXMUL_INT32
                : choice <= 4 ? g.acc
                              : APPROXMUL_INT64;
    return g;
}

// An (outer, channels, inner) layout of 8-byte elements the quantization
// calls accept as a size: the "huge" cases are the ones it must refuse.
inline bool layout_addressable(int64_t outer, int64_t channels, int64_t inner) {
    int64_t bytes;
    return outer >= 0 && channels >= 0 && inner >= 0 &&
           !__builtin_mul_overflow(outer, channels, &bytes) &&
           !__builtin_mul_overflow(bytes, inner, &bytes) && !__builtin_mul_overflow(bytes, 8, &bytes);
}

}  // namespace fuzz
