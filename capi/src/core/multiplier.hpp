// The multiplier model: an n x n bit integer multiplier, unsigned or two's
// complement, described by a product table (n <= 12) and/or a product
// function (any n up to 16). Immutable once built, so handles can be shared
// between threads without locking.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace approxmul {

// Tables are accepted up to 12 bits (4096 x 4096 int32: 64 MiB); models
// given as functions are tabulated at once up to 8 bits, the width the
// byte-plane table kernels index (wider tables run on the generic kernel).
constexpr int kMaxTableBits = 12;
constexpr int kMaxTabulatedBits = 8;
constexpr int kMaxBits = 16;

// How the kernels compute a multiplier; chosen once, when it is built.
enum class Plan {
    ExactGemm,   // products are a*b: plain integer GEMM
    Factorized,  // a short sum of exact GEMMs on transformed operands (see Factorization)
    Table,       // arbitrary product table, n <= 12 (byte-plane kernels up to 8 bits)
    // M(a, b) = a b + sum_p E_p(digit(a), digit(b)): the error a sum of
    // functions of one byte of each raw bit pattern for n > 8 (column
    // truncation and broken arrays: each dropped bit is a function of one
    // bit of a and one of b), of the low nibbles alone for 5..8-bit tables
    // (cut <= 4, where the set has a nibble kernel): the exact GEMM plus one
    // table GEMM of each E_p on those digits (error_parts())
    ExactPlusTable,
    Function,    // no table (n > 8): one function call per product
};

// An exact integer decomposition M(a, b) = sum_r u[r][a] * v[r][b] over every
// operand pair, a and b indexed by raw bit pattern. Families with such
// structure (DRUM: rank 1; truncation: 1 + cut) provide one, and kernels
// then compute `rank` exact integer GEMMs instead of looking up products.
struct Factorization {
    int rank = 0;
    std::vector<int64_t> u;  // rank x 2^bits
    std::vector<int64_t> v;  // rank x 2^bits
};

// The int16 GEMM's operand factors of an exact (up to 8 bits) or
// factorized plan whose factors fit int16, by raw bit pattern, built with
// the plan (a 16-bit model's tables are 2 x 64 Ki entries per rank: per
// call they cost more than a small GEMM).
struct Int16Factors {
    int rank = 0;  // 0: none
    std::vector<int16_t> u, v;  // rank x 2^bits
    // rank 1 over 16 bits with the factor equal to the pattern as int16
    bool u_is_int16_value = false, v_is_int16_value = false;
};

// The byte GEMM's form of the int16 factors (kernels/u8_gemm.cpp): each
// term's factors moved into bytes exactly, a power of two shifted between
// them, B's offset by b_offset[r]. Built with the plan for both
// orientations (A the first operand, or flipped: the second): searched on
// every call, it cost each of conv2d's jobs a few microseconds.
struct U8Factors {
    bool found = false;
    bool a_signed = false;              // A int8 / B uint8, else A uint8 / B int8
    std::vector<uint8_t> a_lut, b_lut;  // rank x 256, indexed by raw stored byte
    std::vector<int64_t> a_value;       // rank x 256: A's byte as a number (row sums)
    std::vector<int64_t> b_offset;      // rank
    int64_t step_bound = 0;             // max over one inner step of |sum_r u_r v'_r|
    // rank 1 with b_lut[x] = x ^ b_flip for every byte (exact codes, as
    // they are or moved by 128): B is packed by XOR instead of lookups
    int b_flip = -1;
    // rank 2..8: byte x's inner steps (a_lut of each factor) as the bytes of
    // one word, and its row correction sum_r b_offset[r] a_value[r][x]
    // (A's packing stores a word per element)
    std::vector<std::array<uint8_t, 8>> a_steps;
    std::vector<int64_t> a_corr;
};

// A rank-1 factorized plan whose factors exceed int16 but span at most 16
// bits (16-bit DRUM): each factor f moved into 0..65535, w = f + offset,
// by raw bit pattern, built with the plan (split_gemm's byte split reads
// them; 2 x 64 Ki entries, rebuilt per call they cost more than a small GEMM).
struct ByteFactors {
    std::vector<uint16_t> u, v;  // empty: none
    int64_t u_offset = 0, v_offset = 0;
};

const char *plan_name(Plan plan);

class Multiplier {
public:
    // Maps two operand values to their product; must be pure and thread safe.
    using ProductFunction = std::function<int64_t(int64_t, int64_t)>;
    // out[i * cols + j] = M(a[i], b[j]): an outer product's products in one
    // call (a GEMM tile's step along the inner dimension), for models that
    // compute many products at once (a netlist simulated bit-sliced); same
    // purity rules.
    using OuterFunction = std::function<void(const int64_t *a, int64_t rows, const int64_t *b,
                                             int64_t cols, int64_t *out)>;
    // sum_k M(a[k], b[k]) for k < n in one call (a vendor C model's loop
    // around its calls, the sum in a register); same purity rules.
    using DotFunction = std::function<int64_t(const int64_t *a, const int64_t *b, int64_t n)>;
    // acc[i * acc_stride + j] += sum over k < nk of M(a[i * a_stride + k],
    // b[k * b_stride + j]) for i < ni, j < nj: a GEMM block in one call (a
    // family whose product formula runs in vector lanes); same purity rules.
    using BlockFunction = std::function<void(int64_t ni, int64_t nk, int64_t nj, const int64_t *a,
                                             int64_t a_stride, const int64_t *b,
                                             int64_t b_stride, int64_t *acc,
                                             int64_t acc_stride)>;

    // table: 4^bits entries, row = first operand's raw bit pattern.
    static std::shared_ptr<const Multiplier> from_table(std::vector<int32_t> table, int bits,
                                                        bool is_signed, std::string name);
    // A model given by a function; tabulated at once when bits <= 8.
    static std::shared_ptr<const Multiplier> from_function(ProductFunction function, int bits,
                                                           bool is_signed, std::string name,
                                                           Factorization factorization = {});
    static std::shared_ptr<const Multiplier> exact(int bits, bool is_signed);

    int bits() const { return bits_; }
    bool is_signed() const { return is_signed_; }
    int64_t min_operand() const { return is_signed_ ? -(int64_t{1} << (bits_ - 1)) : 0; }
    int64_t max_operand() const {
        return is_signed_ ? (int64_t{1} << (bits_ - 1)) - 1 : (int64_t{1} << bits_) - 1;
    }
    uint32_t operand_mask() const { return (uint32_t{1} << bits_) - 1; }

    bool has_table() const { return !table_.empty(); }
    // Row-major 2^bits x 2^bits table indexed by raw bit patterns, or empty.
    const std::vector<int32_t> &table() const { return table_; }

    // Product of two in-range operand values.
    int64_t product(int64_t a, int64_t b) const {
        if (has_table())
            return table_[(static_cast<uint32_t>(a) & operand_mask()) << bits_ |
                          (static_cast<uint32_t>(b) & operand_mask())];
        return function_(a, b);
    }
    // out[i * cols + j] = product(a[i], b[j]), through the outer function if any.
    void outer_products(const int64_t *a, int64_t rows, const int64_t *b, int64_t cols,
                        int64_t *out) const;

    int64_t min_product() const { return min_product_; }
    int64_t max_product() const { return max_product_; }
    int64_t max_abs_product() const;

    // Present (rank > 0) when the model supplied an exact decomposition.
    const Factorization &factorization() const { return factorization_; }

    Plan plan() const { return plan_; }
    // With plan() Factorized: whether the factors fit the int16 GEMM as they
    // are; else they are split into bytes first (fits_split_kernels), and
    // split_parts() holds the parts, built with the plan.
    bool factors_fit_int16() const { return factors_fit_int16_; }
    const Int16Factors &int16_factors() const { return int16_factors_; }
    // int16_factors() in the byte GEMM's form, A the first operand or (flipped) the second.
    const U8Factors &u8_factors(bool flipped) const { return u8_factors_[flipped ? 1 : 0]; }
    using SplitParts = std::array<std::shared_ptr<const Multiplier>, 3>;
    const SplitParts &split_parts() const { return split_parts_; }
    const ByteFactors &byte_factors() const { return byte_factors_; }
    // The parts of factorization f of a bits-wide model (split_factorization)
    // as models whose factors fit the int16 GEMM.
    static SplitParts make_split_parts(const Factorization &f, int bits, bool is_signed);

    // Table kernel data (see structure.hpp): M - byte_plane_offset() split
    // into byte planes, per stationary operand; empty unless plan() is Table
    // and the products span at most 16 bits.
    const std::vector<uint8_t> &byte_planes(bool transposed) const {
        return transposed ? planes_transposed_ : planes_;
    }
    int32_t byte_plane_offset() const { return static_cast<int32_t>(min_product_); }
    // The same products (M - byte_plane_offset()) as whole uint16 values,
    // wide[s * 256 + x]: the scalar table kernels' layout (one load a product).
    const std::vector<uint16_t> &wide_planes(bool transposed) const {
        return transposed ? wide_transposed_ : wide_;
    }
    // With plan() ExactPlusTable: M - a b as a sum of error parts, each an
    // unsigned model of the digits' width (8 or 4) indexed by one digit of
    // a's and one of b's raw bit patterns, (pattern & mask) >> shift, its
    // products times 2^scale (a power of two they all shared: cells of the
    // high bytes, which the table kernels' 16-bit sums then hold); and the
    // exact model of M's width.
    struct ErrorPart {
        uint32_t a_mask, b_mask;
        int a_shift, b_shift, scale;
        std::shared_ptr<const Multiplier> table;
    };
    const std::vector<ErrorPart> &error_parts() const { return error_parts_; }
    const std::shared_ptr<const Multiplier> &exact_part() const { return exact_part_; }
    // Gives a wide model that was just built (not yet shared) that plan: the
    // family states that its error is a sum of functions of byte pairs
    // (checked here on every low-byte pair under a few high bytes and on
    // spread pairs, everywhere when the model is tabulated). No effect on
    // models with a faster plan.
    static std::shared_ptr<const Multiplier> with_byte_pair_errors(
        std::shared_ptr<const Multiplier> m);

    const std::string &name() const { return name_; }
    // The canonical spec string that rebuilds this model, "" if none.
    const std::string &spec() const { return spec_; }
    // Gives a model that was just built (not yet shared) its spec.
    static std::shared_ptr<const Multiplier> with_spec(std::shared_ptr<const Multiplier> m,
                                                       std::string spec);
    // Gives a function model that was just built (not yet shared) an outer function.
    static std::shared_ptr<const Multiplier> with_outer_function(
        std::shared_ptr<const Multiplier> m, OuterFunction outer);
    // Gives a function model that was just built (not yet shared) a dot function.
    static std::shared_ptr<const Multiplier> with_dot_function(std::shared_ptr<const Multiplier> m,
                                                               DotFunction dot);
    bool has_dot_function() const { return static_cast<bool>(dot_function_); }
    int64_t dot(const int64_t *a, const int64_t *b, int64_t n) const { return dot_function_(a, b, n); }
    // Gives a function model that was just built (not yet shared) a block function.
    static std::shared_ptr<const Multiplier> with_block_function(
        std::shared_ptr<const Multiplier> m, BlockFunction block);
    bool has_block_function() const { return static_cast<bool>(block_function_); }
    const BlockFunction &block_function() const { return block_function_; }

private:
    Multiplier(int bits, bool is_signed, std::string name);
    void finish();  // computes the product range and the plan
    void build_int16_factors();
    void build_byte_factors();
    // from_table; table_plan_only keeps the table plan whatever the table's
    // factorization (a low-nibble error, for the nibble kernel)
    static std::shared_ptr<const Multiplier> tabulated(std::vector<int32_t> table, int bits,
                                                       bool is_signed, std::string name,
                                                       bool table_plan_only);
    // Takes the ExactPlusTable plan when the error is a sum of at most
    // max_parts functions of digit pairs (the low `width` bits and the rest
    // of each pattern) on every pair checked (all pairs when tabulated);
    // otherwise leaves all as is and says why.
    enum class DigitErrors { Taken, TooManyParts, NotASum };
    DigitErrors take_digit_errors(int width, size_t max_parts);

    int bits_;
    bool is_signed_;
    std::string name_;
    std::string spec_;
    std::vector<int32_t> table_;
    ProductFunction function_;
    OuterFunction outer_function_;
    DotFunction dot_function_;
    BlockFunction block_function_;
    Factorization factorization_;
    bool known_exact_ = false;
    bool table_plan_only_ = false;  // a low-nibble error: the nibble kernel, whatever its rank
    bool factors_fit_int16_ = false;
    Int16Factors int16_factors_;
    std::array<U8Factors, 2> u8_factors_;
    SplitParts split_parts_;
    ByteFactors byte_factors_;
    std::vector<ErrorPart> error_parts_;
    std::shared_ptr<const Multiplier> exact_part_;
    int64_t min_product_ = 0;
    int64_t max_product_ = 0;
    Plan plan_ = Plan::Function;
    std::vector<uint8_t> planes_, planes_transposed_;
    std::vector<uint16_t> wide_, wide_transposed_;
};

void check_width(int bits, int max_bits);

}  // namespace approxmul
