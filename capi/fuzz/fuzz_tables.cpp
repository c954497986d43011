// The text parsers under fuzz: table files (approxmul_table_parse, all three
// formats and orders) and spec strings (approxmul_multiplier_from_spec).
// Bytes come from the fuzzer in buffers of exactly their size. A parse that
// fails writes nothing; one that succeeds gives a table every entry of which
// lies in the width's product range and builds a multiplier; a spec that
// parses has a canonical spec that parses to the same table.
#include "fuzz_common.hpp"

#include <string>

using namespace fuzz;

namespace {

constexpr int32_t kSentinel = 0x5a5a5a5a;

void fuzz_table_file(FuzzedDataProvider &in) {
    const int format = in.ConsumeIntegralInRange(0, 4);  // 0 and 4 are invalid
    const int bits = in.ConsumeIntegralInRange(-1, 9);   // 0 infers; -1, 9 invalid
    const int is_signed = in.ConsumeBool();
    const int order = in.ConsumeIntegralInRange(0, 4);
    const int64_t out_len = in.ConsumeBool() ? 65536 : in.ConsumeIntegralInRange<int64_t>(-1, 70000);
    const std::vector<uint8_t> bytes = in.ConsumeRemainingBytes<uint8_t>();
    std::unique_ptr<uint8_t[]> file(new uint8_t[bytes.size() + 1]);  // never 0 bytes
    if (!bytes.empty()) std::memcpy(file.get(), bytes.data(), bytes.size());
    std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(out_len, 0)) + 1, kSentinel);
    int bits_out = -7;
    const approxmul_status status = checked(approxmul_table_parse(
        file.get(), static_cast<int64_t>(bytes.size()), static_cast<approxmul_table_format>(format),
        bits, is_signed, static_cast<approxmul_table_order>(order), out.data(), out_len,
        &bits_out));
    if (status != APPROXMUL_OK) {
        expect(bits_out == -7, "bits_out written on failure");
        for (int32_t x : out) expect(x == kSentinel, "table written on failure");
        return;
    }
    expect(bits_out >= 1 && bits_out <= 8 && (bits == 0 || bits == bits_out), "bits_out", bits_out);
    const int64_t entries = int64_t{1} << (2 * bits_out);
    expect(entries <= out_len, "more entries than out_len", entries);
    const int64_t limit = int64_t{1} << (2 * bits_out);
    for (int64_t i = 0; i < entries; ++i) {
        const int64_t v = out[static_cast<size_t>(i)];
        expect(is_signed ? (v >= -limit / 2 && v < limit / 2) : (v >= 0 && v < limit),
               "entry outside the product range", v);
    }
    for (size_t i = static_cast<size_t>(entries); i < out.size(); ++i)
        expect(out[i] == kSentinel, "written past the table", static_cast<long long>(i));
    approxmul_multiplier *m = nullptr;
    expect(checked(approxmul_multiplier_from_table(out.data(), entries, bits_out, is_signed, &m)) ==
               APPROXMUL_OK, "a parsed table does not build a multiplier");
    approxmul_multiplier_destroy(m);
}

std::vector<int32_t> table_of(approxmul_multiplier *m) {
    int bits = 0;
    expect(checked(approxmul_multiplier_bits(m, &bits)) == APPROXMUL_OK, "bits query");
    if (bits > 8) return {};
    std::vector<int32_t> table(size_t{1} << (2 * bits));
    expect(checked(approxmul_multiplier_table(m, table.data(), static_cast<int64_t>(table.size()))) ==
               APPROXMUL_OK, "table query");
    return table;
}

void fuzz_spec(FuzzedDataProvider &in) {
    const std::string spec = in.ConsumeRandomLengthString(96);  // C string: stops at NUL
    approxmul_multiplier *m = reinterpret_cast<approxmul_multiplier *>(0x1);
    if (checked(approxmul_multiplier_from_spec(spec.c_str(), &m)) != APPROXMUL_OK) {
        expect(m == reinterpret_cast<approxmul_multiplier *>(0x1), "handle written on failure");
        return;
    }
    const char *canonical = nullptr;
    expect(checked(approxmul_multiplier_spec(m, &canonical)) == APPROXMUL_OK && canonical &&
               canonical[0], "no canonical spec");
    approxmul_multiplier *again = nullptr;
    expect(checked(approxmul_multiplier_from_spec(canonical, &again)) == APPROXMUL_OK,
           "the canonical spec does not parse");
    expect(table_of(m) == table_of(again), "the canonical spec builds another multiplier");
    approxmul_multiplier_destroy(again);
    approxmul_multiplier_destroy(m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    if (in.ConsumeBool())
        fuzz_table_file(in);
    else
        fuzz_spec(in);
    return 0;
}
