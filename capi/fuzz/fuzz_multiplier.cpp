// Multiplier construction and queries under fuzz: tables of any length and
// width (valid or not), NULL pointers, product queries with any operands,
// and approxmul_accumulator_dtype, whose answer is checked against the
// exact worst-case sum computed here over every operand pair.
#include "fuzz_common.hpp"

using namespace fuzz;

namespace {

void check_constructors(FuzzedDataProvider &in) {
    const int bits = in.ConsumeIntegralInRange(-2, 18);
    const int64_t len = in.ConsumeBool() ? (bits >= 0 && bits <= 8 ? int64_t{1} << (2 * bits) : 0)
                                         : in.ConsumeIntegral<int64_t>();
    std::vector<int32_t> table(len > 0 && len <= 65536 ? static_cast<size_t>(len) : 1, 7);
    approxmul_multiplier *out = nullptr;
    const bool null_table = in.ConsumeIntegralInRange(0, 7) == 0;
    const bool null_out = in.ConsumeIntegralInRange(0, 7) == 0;
    // the buffer holds len entries whenever len is a valid table length
    const bool valid = !null_table && !null_out && bits >= 1 && bits <= 8 &&
                       len == (int64_t{1} << (2 * bits));
    approxmul_status status = checked(approxmul_multiplier_from_table(
        null_table ? nullptr : table.data(), len, bits, in.ConsumeBool(),
        null_out ? nullptr : &out));
    expect((status == APPROXMUL_OK) == valid, "from_table status", status);
    approxmul_multiplier_destroy(out);
    out = nullptr;
    status = checked(approxmul_multiplier_exact(bits, in.ConsumeBool(), null_out ? nullptr : &out));
    expect((status == APPROXMUL_OK) == (!null_out && bits >= 1 && bits <= 16), "exact status",
           status);
    approxmul_multiplier_destroy(out);
}

void check_queries(FuzzedDataProvider &in, const Model &m) {
    int bits = 0, is_signed = -1;
    expect(checked(approxmul_multiplier_bits(m.handle, &bits)) == APPROXMUL_OK && bits == m.bits,
           "bits", bits);
    expect(checked(approxmul_multiplier_is_signed(m.handle, &is_signed)) == APPROXMUL_OK &&
               is_signed == m.is_signed,
           "is_signed");
    expect(checked(approxmul_multiplier_bits(m.handle, nullptr)) == APPROXMUL_ERR_NULL_POINTER,
           "NULL out");
    expect(checked(approxmul_multiplier_bits(nullptr, &bits)) == APPROXMUL_ERR_NULL_POINTER,
           "NULL multiplier");
    const char *text = nullptr;
    expect(checked(approxmul_multiplier_name(m.handle, &text)) == APPROXMUL_OK && text && *text,
           "name");
    expect(checked(approxmul_multiplier_plan(m.handle, &text)) == APPROXMUL_OK && text && *text,
           "plan");

    // the table comes back as given (exact: a*b), only for widths <= 8
    const int64_t side = int64_t{1} << m.bits;
    const int64_t out_len = m.bits <= 8 && in.ConsumeBool() ? side * side : in.ConsumeIntegralInRange<int64_t>(-1, 70000);
    std::vector<int32_t> table(static_cast<size_t>(out_len > 0 ? out_len : 1), 0x5a5a5a5a);
    const approxmul_status status =
        checked(approxmul_multiplier_table(m.handle, table.data(), out_len));
    expect((status == APPROXMUL_OK) == (m.bits <= 8 && out_len == side * side), "table status",
           status);
    if (status == APPROXMUL_OK)
        for (int64_t x = 0; x < side; ++x)
            for (int64_t y = 0; y < side; ++y) {
                // raw bit patterns back to operand values
                const int64_t a = m.is_signed && x >= side / 2 ? x - side : x;
                const int64_t b = m.is_signed && y >= side / 2 ? y - side : y;
                expect(table[static_cast<size_t>(x * side + y)] == m.product(a, b), "table entry");
            }
    else
        for (int32_t entry : table) expect(entry == 0x5a5a5a5a, "table written on failure");

    for (int n = in.ConsumeIntegralInRange(0, 8); n > 0; --n) {
        const int64_t a = in.ConsumeBool() ? in.ConsumeIntegral<int64_t>()
                                           : in.ConsumeIntegralInRange(m.min_operand(), m.max_operand());
        const int64_t b = in.ConsumeIntegralInRange(m.min_operand() - 1, m.max_operand() + 1);
        int64_t product = 0x5a5a;
        const approxmul_status s = checked(approxmul_multiplier_product(m.handle, a, b, &product));
        expect((s == APPROXMUL_OK) == (m.in_range(a) && m.in_range(b)), "product status", s);
        expect(s == APPROXMUL_OK ? product == m.product(a, b) : product == 0x5a5a, "product");
    }
}

// The accumulator type must be sound: int32 only when every possible sum of
// `inner` zero-point adjusted terms fits int32, int64 only when it fits int64.
void check_accumulator(FuzzedDataProvider &in, const Model &m) {
    const int64_t inner = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 1 << 22)
                                           : in.ConsumeIntegral<int64_t>();
    const int64_t za = in.ConsumeIntegralInRange(m.min_operand() - 1, m.max_operand() + 1);
    const int64_t zb = in.ConsumeIntegralInRange(m.min_operand() - 1, m.max_operand() + 1);
    approxmul_dtype acc = static_cast<approxmul_dtype>(0);
    const approxmul_status status = checked(approxmul_accumulator_dtype(m.handle, inner, za, zb, &acc));
    if (inner < 0 || !m.in_range(za) || !m.in_range(zb)) {
        expect(status != APPROXMUL_OK && acc == 0, "bad inner or zero point accepted", status);
        return;
    }
    if (status != APPROXMUL_OK) {
        expect(status == APPROXMUL_ERR_OVERFLOW, "accumulator status", status);
        return;
    }
    // a sum of inner terms lies within inner * [min term, max term]
    i128 lo = 0, hi = 0;
    const bool wide = m.bits > 8;  // 2^32 pairs: the extremes of a*b are at the corners
    const int64_t step = wide ? m.max_operand() - m.min_operand() : 1;
    for (int64_t a = m.min_operand(); a <= m.max_operand(); a += step)
        for (int64_t b = m.min_operand(); b <= m.max_operand(); b += step) {
            const i128 term = static_cast<i128>(m.product(a, b)) - static_cast<i128>(zb) * a -
                              static_cast<i128>(za) * b + static_cast<i128>(za) * zb;
            lo = term < lo ? term : lo;
            hi = term > hi ? term : hi;
        }
    const i128 limit = acc == APPROXMUL_INT32 ? INT32_MAX : INT64_MAX;
    expect(acc == APPROXMUL_INT32 || acc == APPROXMUL_INT64, "accumulator dtype value", acc);
    expect(lo * inner >= -limit - 1 && hi * inner <= limit, "accumulator can overflow", acc);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    check_constructors(in);
    auto m = make_model(in);
    check_queries(in, *m);
    check_accumulator(in, *m);
    return 0;
}
