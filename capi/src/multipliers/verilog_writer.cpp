// Gate-level Verilog for the families that are circuits: the exact array
// multiplier, column truncation and the broken array, unsigned or on the
// Baugh-Wooley array (signed). Partial products are AND/NAND primitives,
// columns are reduced by Wallace-style stages of full and half adders
// (continuous assignments) and a ripple-carry adder gives the 2n output
// bits; everything above column 2n-1 is dropped, which is the mod 2^(2n)
// wrap the signed families are defined by. Reading the text back
// (netlist::parse) must give the family's table exactly (tests).
#include <map>
#include <sstream>

#include "../core/error.hpp"
#include "../netlist/netlist.hpp"
#include "library.hpp"

namespace approxmul::netlist {
namespace {

// "family:key=value,..." (canonical) -> family, values
std::map<std::string, int64_t> parameters(const std::string &canonical, std::string &family) {
    const size_t colon = canonical.find(':');
    family = canonical.substr(0, colon);
    std::map<std::string, int64_t> values;
    std::stringstream rest(colon == std::string::npos ? "" : canonical.substr(colon + 1));
    std::string item;
    while (std::getline(rest, item, ',')) {
        const size_t eq = item.find('=');
        values[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
    }
    return values;
}

class Writer {
public:
    explicit Writer(int width) : columns_(size_t(width)) {}

    std::string fresh(const char *stem) { return stem + std::to_string(counter_++); }
    void wire(const std::string &name) { wires_ += "  wire " + name + ";\n"; }
    void put(int column, std::string bit) {
        if (column < int(columns_.size())) columns_[size_t(column)].push_back(std::move(bit));
    }

    void full_adder(int column, const std::string &x, const std::string &y, const std::string &z,
                    std::vector<std::vector<std::string>> &next) {
        const std::string s = fresh("s"), c = fresh("c");
        wire(s);
        wire(c);
        body_ += "  assign " + s + " = " + x + " ^ " + y + " ^ " + z + ";\n";
        body_ += "  assign " + c + " = (" + x + " & " + y + ") | (" + z + " & (" + x + " ^ " + y + "));\n";
        next[size_t(column)].push_back(s);
        if (column + 1 < int(next.size())) next[size_t(column) + 1].push_back(c);
    }
    void half_adder(int column, const std::string &x, const std::string &y,
                    std::vector<std::vector<std::string>> &next) {
        const std::string s = fresh("s"), c = fresh("c");
        wire(s);
        wire(c);
        body_ += "  assign " + s + " = " + x + " ^ " + y + ";\n";
        body_ += "  assign " + c + " = " + x + " & " + y + ";\n";
        next[size_t(column)].push_back(s);
        if (column + 1 < int(next.size())) next[size_t(column) + 1].push_back(c);
    }

    // Wallace stages until every column has at most two bits.
    void reduce() {
        auto tall = [this] {
            for (const auto &c : columns_)
                if (c.size() > 2) return true;
            return false;
        };
        while (tall()) {
            std::vector<std::vector<std::string>> next(columns_.size());
            for (size_t k = 0; k < columns_.size(); ++k) {
                const auto &bits = columns_[k];
                size_t i = 0;
                for (; i + 3 <= bits.size(); i += 3) full_adder(int(k), bits[i], bits[i + 1], bits[i + 2], next);
                if (bits.size() - i == 2 && bits.size() > 2) {
                    half_adder(int(k), bits[i], bits[i + 1], next);
                    i += 2;
                }
                for (; i < bits.size(); ++i) next[k].push_back(bits[i]);
            }
            columns_ = std::move(next);
        }
    }

    // Ripple-carry addition of the two rows left; output bit k per column.
    void final_adder(const std::string &out) {
        std::string carry;
        for (size_t k = 0; k < columns_.size(); ++k) {
            std::vector<std::string> bits = columns_[k];
            if (!carry.empty()) bits.push_back(carry);
            carry.clear();
            std::string sum = "1'b0";
            if (bits.size() == 1) {
                sum = bits[0];
            } else if (bits.size() >= 2) {
                std::vector<std::vector<std::string>> next(k + 2);
                if (bits.size() == 2) half_adder(int(k), bits[0], bits[1], next);
                else full_adder(int(k), bits[0], bits[1], bits[2], next);
                sum = next[k][0];
                if (next[k + 1].size() == 1 && k + 1 < columns_.size()) carry = next[k + 1][0];
            }
            body_ += "  assign " + out + "[" + std::to_string(k) + "] = " + sum + ";\n";
        }
    }

    std::vector<std::vector<std::string>> columns_;
    std::string wires_, body_;
    int counter_ = 0;
};

}  // namespace

std::string write_family(const std::string &spec) {
    const std::string canonical = library::from_spec(spec)->spec();
    std::string family;
    auto v = parameters(canonical, family);
    const int n = int(v["bits"]);
    const bool is_signed = v["signed"] != 0;
    int hbl = 0, vbl = 0;
    int64_t constant = 0;
    if (family == "truncated") {
        vbl = int(v["cut"]);
        if (v["correct"]) constant = library::truncation_correction(n, vbl, is_signed);
    } else if (family == "bam") {
        hbl = int(v["hbl"]);
        vbl = int(v["vbl"]);
    } else if (family != "exact") {
        fail(APPROXMUL_ERR_UNSUPPORTED,
             "no netlist writer for the family '%s': written as circuits are exact, truncated "
             "and bam",
             family.c_str());
    }
    Writer w(2 * n);
    std::string cells;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
            if (j < hbl || i + j < vbl) continue;
            const bool nand = is_signed && ((i == n - 1) != (j == n - 1));
            const std::string name = "pp" + std::to_string(i) + "_" + std::to_string(j);
            w.wire(name);
            cells += std::string("  ") + (nand ? "nand" : "and") + " g_" + name + " (" + name + ", A[" +
                     std::to_string(i) + "], B[" + std::to_string(j) + "]);\n";
            w.put(i + j, name);
        }
    if (is_signed) {  // the Baugh-Wooley constant ones
        if (n >= vbl) w.put(n, "1'b1");
        if (2 * n - 1 >= vbl) w.put(2 * n - 1, "1'b1");
    }
    for (int k = 0; k < 2 * n; ++k)
        if ((uint64_t(constant) >> k) & 1) w.put(k, "1'b1");
    w.reduce();
    w.final_adder("O");

    std::string module = canonical;
    for (char &c : module)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    const std::string top = std::to_string(n - 1), out_top = std::to_string(2 * n - 1);
    return "// " + canonical + ": gate-level netlist written by approxmul (docs/multipliers.md)\n" +
           "// spec = " + canonical + "\n" +
           "module " + module + " (A, B, O);\n" + "  input [" + top + ":0] A;\n" + "  input [" + top +
           ":0] B;\n" + "  output [" + out_top + ":0] O;\n" + w.wires_ + cells + w.body_ + "endmodule\n";
}

}  // namespace approxmul::netlist
