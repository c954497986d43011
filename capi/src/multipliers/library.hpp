// The multiplier library: built-in families named by spec strings, table
// file parsers, vendor C models and exhaustive error metrics. Everything
// here builds on core/multiplier.hpp and is reached through capi.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "approxmul.h"
#include "../core/multiplier.hpp"

namespace approxmul::library {

// ---- families and spec strings (families.cpp)

struct FamilyInfo {
    std::string name, parameters, description;
};
const std::vector<FamilyInfo> &family_infos();

// "family[:key=value,...]" -> multiplier whose spec() is the canonical form.
std::shared_ptr<const Multiplier> from_spec(const std::string &spec);

// The constant that truncated:correct=1 adds (also written into its netlist).
int64_t truncation_correction(int bits, int cut, bool is_signed);

// ---- table files (tables.cpp)

// Parses a file's bytes into a raw-bit-pattern table; bits 0 = infer.
// format and order are approxmul_table_format / _order values, checked here.
std::vector<int32_t> parse_table(const unsigned char *data, size_t size, int format, int &bits,
                                 bool is_signed, int order);

// ---- vendor C models and callbacks (foreign.cpp)

// signature: an approxmul_signature value, checked here.
std::shared_ptr<const Multiplier> from_c_function(approxmul_function function, int signature,
                                                  int bits, bool is_signed, std::string name);
std::shared_ptr<const Multiplier> from_callback(approxmul_product_callback callback,
                                                void *user_data, int bits, bool is_signed);

// ---- metrics (metrics.cpp)

approxmul_metrics metrics(const Multiplier &m);
void error_map(const Multiplier &m, int64_t *out);  // 4^bits entries, bits <= 12
// The 4^bits products by raw bit patterns, from the table or the model; bits <= 12.
void product_table(const Multiplier &m, int32_t *out);

// ---- gradients (gradients.cpp); definitions in approxmul.h

void gradient_table(const Multiplier &m, bool along_b, int half_window, double *out);  // 4^bits
void gradient_slopes(const Multiplier &m, bool along_b, double *out);                 // 2^bits

}  // namespace approxmul::library
