// Structure found in plain product tables, so that a multiplier given only
// as a table still runs on the fastest bit-exact kernel: an exact integer
// factorization M(a,b) = sum_r u_r(a) v_r(b) of small rank, and the byte
// planes the table kernel looks products up in.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "multiplier.hpp"

namespace approxmul {

// Largest rank computed as a sum of exact GEMMs rather than by table lookups:
// each rank term costs about one int16 GEMM (docs/benchmarks.md); instruction
// sets with slow int16 GEMMs lower it (kernels::max_factorized_rank).
constexpr int kMaxFactorizedRank = 6;

// Longest factorization whose factors fit bytes that runs as a GEMM where
// the byte GEMM multiplies AMX tiles (kernels::max_byte_factorized_rank):
// rank 8 there costs about what 1.3 int16 GEMMs do elsewhere, and truncation
// with cut 5-7 (rank 6-8) would otherwise take the table kernel.
constexpr int kMaxByteFactorizedRank = 8;

// Largest rank taken from the general search below. Its factors seldom
// fit bytes (an exact product plus a residue error: 0..300), so they run as
// int16 GEMMs: against the table kernel, rank 2 measured 1.1-1.5x faster,
// rank 3 0.76-1.04x, rank 4 0.57-0.79x (AVX-512 VNNI, 2 threads,
// docs/benchmarks.md). kernels::max_lattice_rank applies it.
constexpr int kMaxLatticeRank = 2;

// A factorization of the 2^bits x 2^bits table (raw bit patterns) with rank
// <= max_rank, or rank 0 when none is found:
//  - separable: M(a,b) = f(a) g(b) (DRUM and other operand-rounding designs);
//  - linear in the bits of one operand: M(a,b) = M(0,b) + sum_i a_i d_i(b)
//    (AND-array multipliers with removed partial products, e.g. truncation),
//    with terms whose d_i are integer multiples of one vector merged;
//  (both O(4^bits * bits)) and else
//  - any integer rank up to lattice_rank (<= max_rank): a basis of the
//    integer lattice the rows span (an exact product plus an error of rank
//    1, whatever the error's form), O(4^bits * rank^2).
Factorization find_factorization(const std::vector<int32_t> &table, int bits, int max_rank,
                                 int lattice_rank);

// True when every u and v fits int16 and sum_r |u_r v_r| <= 2^31 - 1: the
// int16 GEMM kernels compute it exactly.
bool fits_int16_kernels(const Factorization &f);

// Factors too wide for int16 still run as GEMMs when each splits into a low
// byte and a high part that fit int16 (|u|, |v| < 2^23): the split GEMM
// then computes rank, 2 rank and rank int16 terms (kernels/split_gemm.cpp),
// so the rank stops at half the longest factorized GEMM.
constexpr int kMaxSplitRank = 3;
bool fits_split_kernels(const Factorization &f);
// Its parts: with x = 2^8 hi(x) + lo(x) (lo in 0..255), sum_r u_r v_r =
// P0 + 2^8 P1 + 2^16 P2 for P0 = sum lo(u) lo(v), P1 = sum hi(u) lo(v) +
// lo(u) hi(v), P2 = sum hi(u) hi(v): factorizations of ranks r, 2r, r.
std::array<Factorization, 3> split_factorization(const Factorization &f);

// Byte planes for the table kernel: for each stationary code s, 512 bytes:
// the low then the high bytes of M - offset over the 256 streamed codes x,
// M(s, x) when !transposed, M(x, s) when transposed. Empty when the
// products span more than 16 bits.
std::vector<uint8_t> byte_planes(const std::vector<int32_t> &table, int bits, int32_t offset,
                                 bool transposed);

}  // namespace approxmul
