// The kernel dispatch point. capi.cpp validates arguments and calls these
// entry points; they pick an implementation from the multiplier's plan and
// the CPU's instruction sets. Inputs reaching them are fully validated.
#pragma once

#include <cstdint>
#include <string>

#include "../core/multiplier.hpp"
#include "../core/operands.hpp"

namespace approxmul::kernels {

struct MatmulProblem {
    const Multiplier *multiplier;
    int64_t rows, cols, inner;
    MatrixView a, b, c;  // a: rows x inner, b: inner x cols, c: rows x cols
    int64_t a_zero_point, b_zero_point;
    int threads = 0;  // 0: approxmul's thread setting; callers that parallelise outside say 1
};

void matmul(const MatmulProblem &problem);

// c[i, j] = mul(a[i, j], b[i, j])
void multiply(const Multiplier &m, const MatrixView &a, const MatrixView &b,
              const MatrixView &c);

// Name of the instruction set the kernels were chosen for ("generic", ...).
const char *active_isa();

// "key=value" lines: the instruction set, CPU features, and the kernel
// each plan runs on (for approxmul_build_info).
std::string dispatch_info();

}  // namespace approxmul::kernels
