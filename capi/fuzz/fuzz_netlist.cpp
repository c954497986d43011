// The Verilog netlist reader under fuzz (approxmul_netlist_parse with and
// without a cell map, approxmul_multiplier_from_netlist) and the family
// netlist writer (approxmul_family_verilog, read back). Input layout, from
// the end (FuzzedDataProvider): a mode byte, a signedness byte, a 2-byte
// cell-map length, then the cell map and the netlist text from the front.
// A parse that fails writes no handle; one that succeeds has statistics,
// and its multiplier (up to 8 bits) has every product in the product range,
// the same through product() and table(). A written family netlist reads
// back to exactly the family's table.
#include "fuzz_common.hpp"

#include <string>

using namespace fuzz;

namespace {

std::vector<int32_t> table_of(approxmul_multiplier *m, int bits) {
    std::vector<int32_t> table(size_t{1} << (2 * bits));
    expect(checked(approxmul_multiplier_table(m, table.data(), static_cast<int64_t>(table.size()))) ==
               APPROXMUL_OK, "table query");
    return table;
}

void check_multiplier(approxmul_multiplier *m, int is_signed) {
    int bits = 0;
    expect(checked(approxmul_multiplier_bits(m, &bits)) == APPROXMUL_OK && bits >= 1 && bits <= 8,
           "bits of a tabulated netlist", bits);
    const std::vector<int32_t> table = table_of(m, bits);
    const int64_t limit = int64_t{1} << (2 * bits);
    const int64_t side = int64_t{1} << bits;
    for (int64_t i = 0; i < int64_t(table.size()); ++i) {
        const int64_t v = table[size_t(i)];
        expect(is_signed ? (v >= -limit / 2 && v < limit / 2) : (v >= 0 && v < limit),
               "product outside the range", v);
    }
    for (int64_t pattern_a : {int64_t{0}, side - 1, side / 2})
        for (int64_t pattern_b : {int64_t{1} % side, side - 1}) {
            const int64_t a = is_signed && pattern_a >= side / 2 ? pattern_a - side : pattern_a;
            const int64_t b = is_signed && pattern_b >= side / 2 ? pattern_b - side : pattern_b;
            int64_t p = 0;
            expect(checked(approxmul_multiplier_product(m, a, b, &p)) == APPROXMUL_OK, "product");
            expect(p == table[size_t(pattern_a * side + pattern_b)], "product() and table() differ", p);
        }
}

void fuzz_netlist(FuzzedDataProvider &in, int mode) {
    const int is_signed = in.ConsumeBool();
    const size_t map_size = in.ConsumeIntegralInRange<size_t>(0, 4096);
    const bool with_map = (mode & 1) != 0;
    const std::vector<uint8_t> map = in.ConsumeBytes<uint8_t>(with_map ? map_size : 0);
    const std::vector<uint8_t> text = in.ConsumeRemainingBytes<uint8_t>();
    // exactly sized copies: a read past either end is an ASan report
    std::unique_ptr<uint8_t[]> text_copy(new uint8_t[text.size() + 1]);
    std::unique_ptr<uint8_t[]> map_copy(new uint8_t[map.size() + 1]);
    if (!text.empty()) std::memcpy(text_copy.get(), text.data(), text.size());
    if (!map.empty()) std::memcpy(map_copy.get(), map.data(), map.size());
    const char *a = (mode & 2) ? "x" : nullptr;
    const char *b = (mode & 2) ? "y" : nullptr;
    const char *out = (mode & 2) ? "p" : nullptr;
    approxmul_netlist *netlist = reinterpret_cast<approxmul_netlist *>(0x1);
    const approxmul_status status = checked(approxmul_netlist_parse(
        text_copy.get(), static_cast<int64_t>(text.size()), nullptr, a, b, out,
        with_map ? map_copy.get() : nullptr, with_map ? static_cast<int64_t>(map.size()) : 0, &netlist));
    if (status != APPROXMUL_OK) {
        expect(netlist == reinterpret_cast<approxmul_netlist *>(0x1), "handle written on failure");
        return;
    }
    const char *info = nullptr;
    expect(checked(approxmul_netlist_info(netlist, &info)) == APPROXMUL_OK && info &&
               std::strncmp(info, "module=", 7) == 0, "netlist info");
    const char *bits_line = std::strstr(info, "\nbits=");
    expect(bits_line != nullptr, "no bits in the info");
    if (std::atoi(bits_line + 6) <= 8) {  // wider ones take seconds: not per input
        approxmul_multiplier *m = nullptr;
        const approxmul_status built = checked(approxmul_multiplier_from_netlist(netlist, is_signed, &m));
        expect(built == APPROXMUL_OK || built == APPROXMUL_ERR_OUT_OF_RANGE, "build status", built);
        if (built == APPROXMUL_OK) {
            check_multiplier(m, is_signed);
            approxmul_multiplier_destroy(m);
        }
    }
    approxmul_netlist_destroy(netlist);
}

// A family spec (the fuzzer's string), written, read back: the same table.
void fuzz_writer(FuzzedDataProvider &in) {
    const std::string spec = in.ConsumeRandomLengthString(64);
    int64_t length = -1;
    if (checked(approxmul_family_verilog(spec.c_str(), nullptr, 0, &length)) != APPROXMUL_OK) {
        expect(length == -1, "length written on failure");
        return;
    }
    approxmul_multiplier *family = nullptr;
    expect(checked(approxmul_multiplier_from_spec(spec.c_str(), &family)) == APPROXMUL_OK,
           "a written family's spec does not parse");
    int bits = 0, is_signed = 0;
    expect(checked(approxmul_multiplier_bits(family, &bits)) == APPROXMUL_OK, "bits");
    expect(checked(approxmul_multiplier_is_signed(family, &is_signed)) == APPROXMUL_OK, "signed");
    if (bits <= 6) {
        std::vector<char> text(static_cast<size_t>(length));
        int64_t again = 0;
        expect(checked(approxmul_family_verilog(spec.c_str(), text.data(), length - 1, &again)) ==
                   APPROXMUL_ERR_SHAPE && again == 0, "a short buffer was accepted");
        expect(checked(approxmul_family_verilog(spec.c_str(), text.data(), length, &again)) ==
                   APPROXMUL_OK && again == length && text.back() == '\0', "writing the netlist");
        approxmul_netlist *netlist = nullptr;
        expect(checked(approxmul_netlist_parse(text.data(), length - 1, nullptr, nullptr, nullptr,
                                               nullptr, nullptr, 0, &netlist)) == APPROXMUL_OK,
               "a written netlist does not parse");
        approxmul_multiplier *back = nullptr;
        expect(checked(approxmul_multiplier_from_netlist(netlist, is_signed, &back)) == APPROXMUL_OK,
               "a written netlist does not build");
        expect(table_of(back, bits) == table_of(family, bits), "the written netlist computes another table");
        approxmul_multiplier_destroy(back);
        approxmul_netlist_destroy(netlist);
    }
    approxmul_multiplier_destroy(family);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    const int mode = in.ConsumeIntegralInRange(0, 4);  // bit 0: cell map, bit 1: port names; 4: writer
    if (mode == 4)
        fuzz_writer(in);
    else
        fuzz_netlist(in, mode);
    return 0;
}
