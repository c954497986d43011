// Gate-level Verilog netlists as multipliers: a bounded parser of the
// structural subset (parser.cpp), levelized once into a flat list of
// two-input gates, and a bit-parallel simulator that tabulates every operand
// pair (simulate.cpp). Nothing in a netlist is executed; the text only
// describes gates. User documentation: docs/multipliers.md, "From a Verilog
// netlist".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../core/multiplier.hpp"

namespace approxmul::netlist {

// The operations of the levelized circuit. Mux is s ? x : y (in[0] = s,
// in[1] = x, in[2] = y); Not uses in[0] only.
enum class Op : uint8_t { And, Or, Xor, Nand, Nor, Xnor, Not, Mux };
constexpr int kOpCount = 8;
const char *op_name(Op op);

// Signal numbering of a circuit: 0 and 1 are the constants, then the bits
// of operand A (LSB first), then those of B, then one signal per gate in
// evaluation order.
struct Gate {
    Op op;
    uint32_t in[3];
};

struct Circuit {
    int a_bits = 0, b_bits = 0;
    std::vector<Gate> gates;         // topologically ordered
    std::vector<uint32_t> outputs;   // output bit k (LSB first) -> signal
    uint32_t first_gate() const { return 2 + uint32_t(a_bits + b_bits); }
};

// Which module and ports to read; empty strings take the defaults.
struct Ports {
    std::string module;          // "": the file's only module
    std::string a = "A", b = "B", out = "O";
};

struct Netlist {
    std::string module;
    Circuit circuit;
    int depth = 0;                                     // longest input-output path, in gates
    std::vector<std::string> metadata;                 // "NAME=value unit" from header comments
    std::vector<std::pair<std::string, int64_t>> cells;  // standard-cell instances by cell name
    int64_t primitives = 0, assigns = 0;               // as written
    std::string info;                                  // "key=value" lines (approxmul_netlist_info)
};

// Parses and levelizes one module. cell_map: "CELL PIN = expression" lines
// (may be empty). Errors name the line (and the net) they are about:
// APPROXMUL_ERR_FORMAT for malformed netlists, APPROXMUL_ERR_UNSUPPORTED
// for Verilog outside the structural subset (behavioural code, module
// instances), which Yosys can lower.
std::shared_ptr<const Netlist> parse(const unsigned char *data, size_t size, const Ports &ports,
                                     const unsigned char *cell_map, size_t cell_map_size);

// Every product, index a << n | b over raw bit patterns (n = operand width
// <= 12): the output vector read as unsigned, or as two's complement when
// is_signed. Values outside the 2n-bit product range are an error.
std::vector<int32_t> tabulate(const Circuit &circuit, bool is_signed);

// A multiplier of the netlist: tabulated up to 8 bits; 9..12 bits keep the
// full product table behind a function plan; wider netlists run as a
// function plan simulated bit-sliced: 2,048 pairs of a GEMM tile's outer
// product per pass (Multiplier::outer_products), single products 64 per pass.
std::shared_ptr<const Multiplier> to_multiplier(std::shared_ptr<const Netlist> netlist,
                                                bool is_signed);

// A gate-level netlist of a built-in family given by its spec (exact,
// truncated, bam): partial-product AND/NAND cells, carry-save reduction
// with full and half adders, a ripple-carry final adder.
std::string write_family(const std::string &spec);

}  // namespace approxmul::netlist
