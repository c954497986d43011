// Chooses, per call, the kernel for a multiplier's plan. Only the portable
// kernels exist so far; instruction-set specific ones register here.
#include "kernels.hpp"

namespace approxmul::kernels {

void generic_matmul(const MatmulProblem &problem);
void generic_multiply(const Multiplier &m, const MatrixView &a, const MatrixView &b,
                      const MatrixView &c);

void matmul(const MatmulProblem &problem) { generic_matmul(problem); }

void multiply(const Multiplier &m, const MatrixView &a, const MatrixView &b,
              const MatrixView &c) {
    generic_multiply(m, a, b, c);
}

const char *active_isa() { return "generic"; }

}  // namespace approxmul::kernels
