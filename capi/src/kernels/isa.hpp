// The kernel registry: one table of function pointers per instruction set.
// isa_kernels.cpp is compiled once per instruction set (generic, avx2,
// avx512) with that set's compiler flags and fills one KernelTable each;
// dispatch.cpp picks the table for this CPU at first use. Only plain C types
// cross this interface, so no C++ inline function is ever compiled with two
// different instruction sets (the linker could otherwise keep the AVX-512
// copy of, say, std::vector code and run it on a CPU without AVX-512).
#pragma once

#include <cstdint>

namespace approxmul::kernels {

struct KernelTable {
    const char *name;  // "generic", "avx2", "avx512"
    const char *gemm_kernel;   // how the int16 GEMM micro-kernel computes
    const char *table_kernel;  // how the table kernel looks products up, or nullptr

    // int16 pair GEMM micro-kernel: C (gemm_mr x gemm_nr int32, row stride
    // ldc) = or += sum over kpairs of A pair * B pair, products and sums
    // wrapping modulo 2^32. Packed layouts:
    //   a[(kp * gemm_mr + r) * 2 + h]   (row r, transformed inner index 2 kp + h)
    //   b[(kp * gemm_nr + j) * 2 + h]   (column j)
    int gemm_mr, gemm_nr;
    void (*gemm_micro)(int64_t kpairs, const int16_t *a, const int16_t *b, int32_t *c,
                       int64_t ldc, int accumulate);

    // Byte-plane table kernel. For each stationary code s[k] (k < inner),
    // looks the streamed codes x[k * x_stride + j] (j < table_width) up in
    // planes[s[k]] (512 bytes: the low bytes of the 256 products, then the
    // high bytes) and adds them into 16-bit byte-plane sums laid out per
    // 64-column chunk c as sums[(c * 4 + p * 2 + h) * 32 + w] for column
    // j = 64 c + 2 w + h, plane p (0: low byte, 1: high byte). The sums are
    // overwritten. inner <= 256, so no sum can overflow (255 * 256 < 65536).
    int table_width;
    void (*table_block)(int64_t inner, const uint8_t *s, const uint8_t *x, int64_t x_stride,
                        const uint8_t *planes, uint16_t *sums);
};

const KernelTable *generic_kernel_table();
const KernelTable *avx2_kernel_table();
const KernelTable *avx512_kernel_table();

// The table chosen for this process (APPROXMUL_ISA or the CPU's best);
// throws APPROXMUL_ERR_UNSUPPORTED when APPROXMUL_ISA names one the CPU lacks.
const KernelTable &selected_kernels();

}  // namespace approxmul::kernels
