// Multipliers computed by foreign code: vendor C models (a function pointer
// plus one of the prototypes in approxmul_signature) and user callbacks.
#include <type_traits>

#include "../core/error.hpp"
#include "library.hpp"

namespace approxmul::library {
namespace {

// Calls f with the operands as the prototype takes them; returns the result
// widened to 64 bits (sign-extended for signed return types).
using Caller = uint64_t (*)(approxmul_function function, int64_t a, int64_t b, uint64_t operand_mask);

template <typename R, typename P, bool SecondFirst>
uint64_t call(approxmul_function function, int64_t a, int64_t b, uint64_t operand_mask) {
    // unsigned parameters get the operand's n-bit pattern, signed ones its value
    const P pa = std::is_signed<P>::value ? P(a) : P(uint64_t(a) & operand_mask);
    const P pb = std::is_signed<P>::value ? P(b) : P(uint64_t(b) & operand_mask);
    const auto f = reinterpret_cast<R (*)(P, P)>(function);
    const R r = SecondFirst ? f(pb, pa) : f(pa, pb);
    return std::is_signed<R>::value ? uint64_t(int64_t(r)) : uint64_t(r);
}

// What a model's raw result means: its 2n-bit product, checked against the
// product range (a result outside it is the model's error, reported).
struct Result {
    int bits;
    bool is_signed;
    bool reinterpret;  // signed operands, unsigned types: a 2n-bit two's complement result
    bool unsigned_types;
    uint64_t product_mask;
    int64_t lo, hi;

    int64_t value(uint64_t r, int64_t a, int64_t b) const {
        int64_t v = int64_t(r);
        if (reinterpret) {
            // zero- or sign-extended by the type
            const uint64_t low = r & product_mask;
            if (r == low || (r | product_mask) == ~uint64_t{0})
                v = low > product_mask >> 1 ? int64_t(low) - int64_t(product_mask) - 1
                                            : int64_t(low);
            else
                v = hi + 1;  // neither: reported below
        } else if (unsigned_types && r > product_mask) {
            v = hi + 1;
        }
        if (v < lo || v > hi)
            fail(APPROXMUL_ERR_OUT_OF_RANGE,
                 "the C function returned %llu (0x%llx) for a=%lld, b=%lld: outside the "
                 "%d-bit %s product range %lld..%lld",
                 static_cast<unsigned long long>(r), static_cast<unsigned long long>(r),
                 static_cast<long long>(a), static_cast<long long>(b), 2 * bits,
                 is_signed ? "signed" : "unsigned", static_cast<long long>(lo),
                 static_cast<long long>(hi));
        return v;
    }
};

// sum_k M(a[k], b[k]): the GEMMs' loop (generic.cpp's dot_gemm), the
// naive loop's order, with its sum in a register, so that the kernels'
// per-product cost is the call itself (bench_vendor.py). Checked: false
// when every value of R is a product in range (a 2n-bit return type read
// as its own signedness), so that no result can fail.
using DotCaller = int64_t (*)(approxmul_function function, const Result &result,
                              uint64_t operand_mask, const int64_t *a, const int64_t *b, int64_t n);

template <typename R, typename P, bool SecondFirst, bool Checked>
int64_t call_dot(approxmul_function function, const Result &result, uint64_t operand_mask,
                 const int64_t *a, const int64_t *b, int64_t n) {
    int64_t sum = 0;
    for (int64_t k = 0; k < n; ++k) {
        const uint64_t r = call<R, P, SecondFirst>(function, a[k], b[k], operand_mask);
        sum += Checked ? result.value(r, a[k], b[k]) : int64_t(r);
    }
    return sum;
}

struct Signature {
    int id;  // approxmul_signature
    const char *prototype;
    int max_bits;
    bool signed_types;
    int result_bits;
    Caller caller;
    DotCaller dot, dot_unchecked;
};

#define APPROXMUL_CALLERS(R, P, SECOND_FIRST)                                   \
    int(8 * sizeof(R)), call<R, P, SECOND_FIRST>, call_dot<R, P, SECOND_FIRST, true>, \
        call_dot<R, P, SECOND_FIRST, false>
const Signature kSignatures[] = {
    {APPROXMUL_SIG_U16_U8_U8, "uint16_t f(uint8_t a, uint8_t b)", 8, false,
     APPROXMUL_CALLERS(uint16_t, uint8_t, false)},
    {APPROXMUL_SIG_I16_I8_I8, "int16_t f(int8_t a, int8_t b)", 8, true,
     APPROXMUL_CALLERS(int16_t, int8_t, false)},
    {APPROXMUL_SIG_U64_U64B_U64A, "uint64_t f(uint64_t b, uint64_t a)", 16, false,
     APPROXMUL_CALLERS(uint64_t, uint64_t, true)},
    {APPROXMUL_SIG_U64_U64_U64, "uint64_t f(uint64_t a, uint64_t b)", 16, false,
     APPROXMUL_CALLERS(uint64_t, uint64_t, false)},
    {APPROXMUL_SIG_U32_U16_U16, "uint32_t f(uint16_t a, uint16_t b)", 16, false,
     APPROXMUL_CALLERS(uint32_t, uint16_t, false)},
    {APPROXMUL_SIG_I32_I16_I16, "int32_t f(int16_t a, int16_t b)", 16, true,
     APPROXMUL_CALLERS(int32_t, int16_t, false)},
};
#undef APPROXMUL_CALLERS

const Signature &find_signature(int id) {
    for (const Signature &s : kSignatures)
        if (s.id == id) return s;
    std::string known;
    for (const Signature &s : kSignatures)
        known += "\n  " + std::to_string(s.id) + ": " + s.prototype;
    fail(APPROXMUL_ERR_INVALID_ARGUMENT, "signature: %d is not an approxmul_signature; known:%s",
         id, known.c_str());
}

}  // namespace

std::shared_ptr<const Multiplier> from_c_function(approxmul_function function, int id,
                                                  int bits, bool is_signed, std::string name) {
    require_pointer(reinterpret_cast<void *>(function), "function");
    const Signature &sig = find_signature(id);
    if (bits < 1 || bits > sig.max_bits)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "bits: %d does not fit %s (1..%d bits)", bits,
             sig.prototype, sig.max_bits);
    if (sig.signed_types && !is_signed)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT,
             "is_signed: %s takes signed operands, so the multiplier must be signed",
             sig.prototype);
    const uint64_t operand_mask = (uint64_t{1} << bits) - 1;
    Result result{bits, is_signed, is_signed && !sig.signed_types, !sig.signed_types, 0, 0, 0};
    result.product_mask = (uint64_t{1} << (2 * bits)) - 1;
    result.lo = is_signed ? -(int64_t{1} << (2 * bits - 1)) : 0;
    result.hi = is_signed ? (int64_t{1} << (2 * bits - 1)) - 1 : int64_t(result.product_mask);
    const Caller caller = sig.caller;
    auto product = [=](int64_t a, int64_t b) {
        return result.value(caller(function, a, b, operand_mask), a, b);
    };
    auto m = Multiplier::from_function(product, bits, is_signed, std::move(name));
    if (m->has_table()) return m;  // tabulated: never called again
    const DotCaller dot =
        !result.reinterpret && sig.result_bits == 2 * bits ? sig.dot_unchecked : sig.dot;
    return Multiplier::with_dot_function(
        std::move(m), [=](const int64_t *a, const int64_t *b, int64_t n) {
            return dot(function, result, operand_mask, a, b, n);
        });
}

std::shared_ptr<const Multiplier> from_callback(approxmul_product_callback callback,
                                                void *user_data, int bits, bool is_signed) {
    require_pointer(reinterpret_cast<void *>(callback), "callback");
    check_width(bits, kMaxTabulatedBits);  // tabulated now: the callback is never kept
    auto product = [=](int64_t a, int64_t b) {
        int64_t p = 0;
        if (callback(user_data, a, b, &p) != 0)
            fail(APPROXMUL_ERR_CALLBACK, "the callback failed for a=%lld, b=%lld",
                 static_cast<long long>(a), static_cast<long long>(b));
        return p;
    };
    return Multiplier::from_function(product, bits, is_signed, "callback");
}

}  // namespace approxmul::library
