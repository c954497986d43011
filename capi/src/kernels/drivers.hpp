// The GEMM plan drivers behind matmul() (dispatch.cpp tries them in the
// order below) and the pieces they share. A driver tiles, packs, shares the
// work among threads, keeps the sums exact and applies the zero points; the
// instruction set only changes the micro-kernels it calls (isa.hpp). Each
// returns false, having written nothing, when the problem or the kernel set
// does not suit it. Inputs are fully validated.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../core/scratch.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

// u8_gemm.cpp: exact and factorized plans as a byte GEMM on vpdpbusd, when
// every factor pair fits bytes exactly (AVX-512 VNNI).
bool u8_gemm(const KernelTable &kernels, const MatmulProblem &problem);
// int16_gemm.cpp: exact and factorized plans as one int16 GEMM over an inner
// dimension of rank * inner (vpdpwssd / vpmaddwd).
bool int16_gemm(const KernelTable &kernels, const MatmulProblem &problem);
// split_gemm.cpp: exact 9..16-bit plans (and 16-bit rank-1 factors) on the
// operands' bytes: one int16 GEMM of one side's bytes by the other's values,
// or, where the byte GEMM runs on AMX tiles, three byte GEMMs (u8_gemm);
// factors beyond int16 as three int16 GEMMs on the factors' bytes; combined
// in int64.
bool split_gemm(const KernelTable &kernels, const MatmulProblem &problem);
// exact_plus_table.cpp: wide models whose error is a table of the low bytes,
// as the exact GEMM (split_gemm) plus an 8-bit table GEMM of the error.
bool exact_plus_table_gemm(const KernelTable &kernels, const MatmulProblem &problem);
// table_gemm.cpp: the table plan, weight-stationary or in product-table order.
bool table_gemm(const KernelTable &kernels, const MatmulProblem &problem);

// generic.cpp: the portable reference for every plan (never declines).
void generic_matmul(const MatmulProblem &problem);
void generic_multiply(const Multiplier &m, const MatrixView &a, const MatrixView &b,
                      const MatrixView &c);

// ------------------------------------------- shared by the drivers (drivers.cpp)

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The threads a call may use: its own request, else approxmul's setting.
int wanted_threads(const MatmulProblem &p);
// Threads for `jobs` units of work: one below a few hundred thousand
// products (a parallel region costs more than it saves), else at most one
// per job.
int threads_for(const MatmulProblem &p, int64_t jobs);

// dst[r * ld + c] = code of v[r0 + r, c0 + c], r < nr, c < nc: the order of
// the two loops follows the view's shorter stride, and 8-bit rows that are
// contiguous are copied whole (masked: exact_plus_table hands its low-bits
// model the operands' own bytes).
void pack_codes(const MatrixView &v, uint32_t mask, int64_t r0, int64_t nr, int64_t c0,
                int64_t nc, uint8_t *dst, int64_t ld);

// C^T = B^T A^T: the same products with the operands' roles swapped, so a
// kernel can put whichever operand suits it first. A multiplier's operands
// swap with them (the callers pick the table or factors of the other side).
MatmulProblem transposed_problem(const MatmulProblem &p);

// The streamed operand's packed blocks (column job x inner block, block_bytes
// each) for drivers whose row jobs each pack the blocks of their column
// job: packed once up front, in parallel by pack(block, state, dst) (a
// State per thread, as parallel_for_each makes them) with
// block = column job * k_blocks + inner block, where several row jobs
// would repeat it and the blocks take at most kSharedPackBytes. Empty
// (size 0: every job packs its own) otherwise. A batch-1 512->512 conv2d
// packed its 63 pixels (u8 GEMM) or its weights' low bits (nibble GEMM)
// once per row job: 8 times per call.
constexpr int64_t kSharedPackBytes = int64_t{8} << 20;
template <typename State, typename Pack>
Scratch<uint8_t> pack_shared(int64_t row_jobs, int64_t col_jobs, int64_t k_blocks,
                             int64_t block_bytes, int threads, const Pack &pack) {
    const int64_t blocks = col_jobs * k_blocks;
    if (row_jobs < 2 || blocks * block_bytes > kSharedPackBytes) return {};
    Scratch<uint8_t> packed(static_cast<size_t>(blocks * block_bytes));
    parallel_for_each<State>(blocks, static_cast<int>(std::min<int64_t>(threads, blocks)),
                             [&](int64_t block, State &state) {
                                 pack(block, state, packed.data() + block * block_bytes);
                             });
    return packed;
}

}  // namespace approxmul::kernels
