// The kernel registry: one table of function pointers per instruction set.
// isa_kernels.cpp is compiled once per instruction set (generic, avx2,
// avx512, avx512amx) with that set's compiler flags and fills one KernelTable each;
// dispatch.cpp picks the table for this CPU at first use. Only plain C types
// cross this interface, so no C++ inline function is ever compiled with two
// different instruction sets (the linker could otherwise keep the AVX-512
// copy of, say, std::vector code and run it on a CPU without AVX-512).
#pragma once

#include <cstdint>

namespace approxmul::kernels {

struct KernelTable {
    const char *name;  // "generic", "avx2", "avx512", "avx512amx"
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
    // Packs two streamed rows of byte codes into one pair step of B panels:
    // column j's values f_h(rows[h][j]) go to dst[(j / gemm_nr) *
    // panel_stride + (j % gemm_nr) * 2 + h], j < n, and the last panel's
    // columns from n on get zeros. f_h is luts[h][code] (256 int16 entries)
    // or, where luts is nullptr, the code itself (as int8 if is_signed);
    // rows[1] == nullptr makes every h = 1 value zero.
    void (*pair_pack)(int64_t n, const uint8_t *const *rows, const int16_t *const *luts,
                      int is_signed, int16_t *dst, int64_t panel_stride);
    // Packs one A panel of gemm_mr rows of byte codes, each holding 2 kpairs
    // codes (as int8 if is_signed): dst[(kp * gemm_mr + r) * 2 + h] =
    // rows[r][2 kp + h], kp < kpairs.
    void (*pair_rows)(int64_t kpairs, const uint8_t *const *rows, int is_signed, int16_t *dst);

    // Weight-stationary table kernel. For each stationary code s[k]
    // (k < inner <= 256), looks the streamed codes x[k * x_stride + j]
    // (j < width, width a multiple of 64 and <= table_width) up in that
    // code's products (M - offset, 0..65535) and adds the sums into acc[j],
    // natural column order, modulo 2^32: callers flush acc to 64 bits at
    // least every 65536 inner steps. Two layouts of the same products are
    // given; each kernel reads the one it wants: planes[s * 512 + x] low
    // bytes, planes[s * 512 + 256 + x] high bytes (byte-permute kernels),
    // wide[s * 256 + x] whole uint16 values (scalar kernels).
    int table_width;
    void (*table_block)(int64_t inner, const uint8_t *s, const uint8_t *x, int64_t x_stride,
                        int64_t width, const uint8_t *planes, const uint16_t *wide,
                        uint32_t *acc);

    // Nibble table kernel, for the tables of models up to 4 bits (nullptr
    // where the set has none): 16 products per stationary code fit one
    // byte-shuffle register. For r < nibble_rows and j < nibble_cols, adds
    // sum over k < inner <= 256 of table[s[r * s_stride + k] * 16 +
    // x[k * nibble_cols + j]] into acc[r * acc_stride + j] modulo 2^32;
    // codes < 16, table entries (M - offset) 0..255, and every `group`
    // consecutive steps' sum of a column fits a byte (group * max <= 255).
    const char *nibble_kernel;
    int nibble_rows, nibble_cols;
    void (*nibble_block)(int64_t inner, const uint8_t *s, int64_t s_stride, const uint8_t *x,
                         const uint8_t *table, int group, uint32_t *acc, int64_t acc_stride);

    // Product-table order (nullptr where the set has none): for pt_rows
    // stationary codes s[i * s_stride + k] (i < pt_rows, k < inner <= 65536)
    // and streamed codes x[k * x_stride + j] (j < ncols), adds
    // sum_k wide[s * 256 + x] into acc[j * pt_rows + i] modulo 2^32.
    // work: 256 * pt_rows * pt_steps uint32 of scratch.
    const char *pt_kernel;
    int pt_rows, pt_steps;
    int64_t pt_min_stream;  // streamed length from which the driver prefers it
    void (*pt_block)(int64_t inner, const uint8_t *s, int64_t s_stride, const uint8_t *x,
                     int64_t x_stride, int64_t ncols, const uint16_t *wide, uint32_t *acc,
                     uint32_t *work);

    // u8 x s8 quad GEMM (vpdpbusd), or nullptr where the set has none (the
    // avx2 level does not assume AVX-VNNI). C (u8_mr x u8_nr int32, row
    // stride ldc) = or += sum over kquads of 4 byte products, wrapping
    // modulo 2^32 (no saturation). Packed layouts:
    //   a[(kq * u8_mr + r) * 4 + h]   (row r, transformed inner index 4 kq + h)
    //   b[(kq * u8_nr + j) * 4 + h]   (column j)
    // a_signed: A's bytes are int8 and B's uint8; else A uint8 and B int8.
    // Tile kernels (u8_tile_quads > 0: AMX, 16 quads per step) take A's
    // rows whole instead, a[r * S + kq * 4 + h] with S = 4 * kquads rounded
    // up to whole steps, zero past kquads; they read B up to that whole
    // step too (rows that meet A's zeros: buffers keep the slack), and run
    // between u8_tiles(1) and u8_tiles(0) on each thread (the tile
    // configuration loaded, then the tiles released).
    const char *u8_kernel;
    int u8_mr, u8_nr, u8_tile_quads;
    void (*u8_tiles)(int begin);
    void (*u8_micro)(int64_t kquads, const uint8_t *a, const uint8_t *b, int32_t *c,
                     int64_t ldc, int accumulate, int a_signed);
    // dst[j] = lut[src[j]] for j < n; dst may be src. Every set has one.
    void (*u8_lut)(int64_t n, const uint8_t *src, const uint8_t *lut, uint8_t *dst);
    // Packs 4 streamed rows into B quads: column j's bytes luts[h][rows[h][j]]
    // (luts nullptr: rows[h][j] ^ flip) go to dst[(j / u8_nr) * panel_stride
    // + (j % u8_nr) * 4 + h], j < n, written in whole 16-column groups
    // (u8_nr is a multiple of 16).
    void (*u8_pack)(int64_t n, const uint8_t *const *rows, const uint8_t *const *luts, int flip,
                    uint8_t *dst, int64_t panel_stride);
    // The same from n column-major columns, rank 1: column j's bytes
    // lut[b[j * col_stride + 4 * kq + h]] (lut nullptr: ^ flip) for kq <
    // kquads, whole quads only. Null where u8_pack is.
    void (*u8_pack_columns)(int64_t n, const uint8_t *b, int64_t col_stride, int64_t kquads,
                            const uint8_t *lut, int flip, uint8_t *dst, int64_t panel_stride);

    // Requantization of n accumulators (int64 if acc64, else int32) into
    // codes of out_code's width (an approxmul_dtype value: int8, uint8, int16
    // or uint16; the low 8 or 16 bits of the clamped value, signed or not alike):
    // out[i] = clamp(zero_point + scale(sat32(acc[i] + bias[i * step]),
    // mantissa[i * step], shift[i * step]), qmin, qmax), step 0 (one channel)
    // or 1 (parameters per element); scale is gemmlowp's double rounding, or
    // TFLite's single rounding if single (quant/requantize.cpp states both).
    // Parameters are validated: mantissa >= 0, shift in -31..30.
    void (*requantize)(int64_t n, const void *acc, int acc64, const int32_t *bias,
                       const int32_t *mantissa, const int32_t *shift, int step,
                       int32_t zero_point, int32_t qmin, int32_t qmax, int single,
                       int out_code, void *out);

    // conv2d's output stage in one pass: requantize (one channel: step 0,
    // int32 accumulators), and with real dequantize with one scale and the
    // same zero point, without the codes in between. For r < rows, c <
    // cols, with a = acc[r * acc_stride + c] (plus term[r * acc_stride + c]
    // modulo 2^32 unless term is nullptr), out[r * out_stride + c] is
    // code(a) (out_bytes 1 or 2: its low bits, as requantize stores them) or
    // scale * (code(a) - zero_point) computed in double (real: out_bytes 4,
    // rounded to float, or 8). The same bits as the two kernels. saturate 0
    // promises that a + bias fits int32 (the caller's bound on the sums),
    // which spares the lanes saturating it.
    void (*requantize_rows)(int64_t rows, int64_t cols, const int32_t *acc, const int32_t *term,
                            int64_t acc_stride, int32_t bias, int32_t mantissa, int32_t shift,
                            int32_t zero_point, int32_t qmin, int32_t qmax, int single,
                            int saturate, double scale, int out_bytes, int real, void *out,
                            int64_t out_stride);

    // Affine quantization of n values (double if x64, else float) into codes
    // of type out_code (an approxmul_dtype value: int8, uint8, int16, uint16):
    // out[i] = clamp(sign(v) * floor(|v| + 0.5) + zero[i * step], lo, hi),
    // v = x[i] / scale[i * step], step 0 (one channel) or 1 (per element);
    // quant/affine.cpp states it; lo, hi within the code type. refuse 0: x
    // has no NaN (checked before), returns 0; 1: returns whether x has a NaN,
    // 2: a NaN or +-infinity, and the codes are then unspecified (the check
    // of any_nan folded into the same pass, for outputs nobody else sees).
    int (*quantize)(int64_t n, const void *x, int x64, const double *scale, const int32_t *zero,
                    int step, int32_t lo, int32_t hi, int out_code, void *out, int refuse);
    // out[i] = scale[i * step] * (codes[i] - zero[i * step]) in double, stored
    // as double if out64, else rounded to float; codes of type code (int8,
    // uint8, int16, uint16 or int32 as approxmul_dtype values).
    void (*dequantize)(int64_t n, const void *codes, int code, const double *scale,
                       const int32_t *zero, int step, int out64, void *out);
    // Whether any of n values (double if x64, else float) is NaN, or with
    // infinite_too NaN or +-infinity.
    int (*any_nan)(int64_t n, const void *x, int x64, int infinite_too);

    // The bytes of n 16-bit codes for split_gemm's byte GEMMs: with w =
    // lut[src[j] & mask] (a factor moved into 0..65535), or without a lut
    // w = ((src[j] & mask) + offset) & mask (a value moved so),
    // hi[j] = (w >> 8) - 128 and lo[j] = (w & 255) - 128; adds the sums of
    // the hi and lo bytes written to *hi_sum and *lo_sum, and, unless
    // col_hi is nullptr, each byte to col_hi[j] / col_lo[j] (int32: callers
    // bound the rows summed).
    void (*byte_split)(int64_t n, const uint16_t *src, uint32_t mask, uint32_t offset,
                       const uint16_t *lut, int8_t *hi, int8_t *lo, int64_t *hi_sum,
                       int64_t *lo_sum, int32_t *col_hi, int32_t *col_lo);

    // Longest exact factorization of an 8-bit table worth running as int16
    // GEMMs (one per rank term) rather than through the table kernel.
    int max_factorized_rank;
    // The factorization rank from which a 5..8-bit model whose error lives in
    // the low nibbles runs faster as the exact GEMM plus a nibble-table GEMM
    // (a rank above max_factorized_rank where that was not measured).
    int nibble_error_min_rank;
    // The same for factorizations whose factors fit the byte GEMM.
    int nibble_error_min_rank_u8;

    // acc[o] += sum over t < taps of plane[offsets[t] + o * step] * v[t]
    // for o < n (a depthwise conv2d's taps over an output row; int32 sums
    // where the layer's bound allows)
    void (*tap_rows32)(int64_t n, const int32_t *plane, int64_t step, int64_t taps,
                       const int64_t *offsets, const int32_t *v, int32_t *acc);
    void (*tap_rows64)(int64_t n, const int32_t *plane, int64_t step, int64_t taps,
                       const int64_t *offsets, const int32_t *v, int64_t *acc);
    // The same taps with kDepthwiseLanes channels as a vector's lanes (small
    // planes, whose rows are too short for tap_rows): for each of the OH x
    // OW outputs p = oy * OW + ox, at position b = oy * row_step + ox * s1
    // of the plane (positions of kDepthwiseLanes int32 lanes),
    //   acc[p][l] = sum over t < taps of plane[b + offsets[t]][l] * v[t][l]
    // (int32 sums).
    void (*tap_lanes32)(int64_t OH, int64_t OW, int64_t row_step, int64_t s1,
                        const int32_t *plane, int64_t taps, const int64_t *offsets,
                        const int32_t *v, int32_t *acc);
    // Lanes in and out of tap_lanes32's layout: lanes[p][l] = value of
    // codes[l * plane_step + p] (int8 where is_signed, else uint8) for the
    // kDepthwiseLanes planes and p < count; and rows[l * row_step + p] =
    // lanes[p][l] + add[l]. (16 x 16 transposes: strided scalar copies cost
    // a 14x14 plane more than its taps.)
    void (*lanes_from_planes)(int64_t count, const uint8_t *codes, int64_t plane_step,
                              int is_signed, int32_t *lanes);
    void (*lanes_to_rows)(int64_t count, const int32_t *lanes, const int32_t *add, int32_t *rows,
                          int64_t row_step);

    // Logarithmic families' products summed over a GEMM block, in
    // sign-magnitude form (negated where the operands' signs differ), operand
    // magnitudes up to 2^16: Mitchell's
    // (families.cpp's `mitchell`) for ilm_rounds 0, else ILM's with
    // ilm_rounds = iterations + 1 (up to 17). For i < ni, j < nj,
    //   acc[i * acc_stride + j] += sum over k < nk of M(a[i * a_stride + k],
    //                                                   b[k * b_stride + j]).
    // In int64 lanes from each operand's leading one k and low part m
    // (|x| = 2^k + m): Mitchell M = S + max(2^(k1+k2), S) with S = m1 2^k2 +
    // m2 2^k1; an ILM round adds a 2^k2 + m2 2^k1 and goes on with the low
    // parts. work: (1 + 3 max(1, ilm_rounds)) * nj int64.
    void (*log_block)(int64_t ni, int64_t nk, int64_t nj, const int64_t *a, int64_t a_stride,
                      const int64_t *b, int64_t b_stride, int ilm_rounds, int64_t *acc,
                      int64_t acc_stride, int64_t *work);
};

// channels per vector of tap_lanes32
constexpr int64_t kDepthwiseLanes = 16;

const KernelTable *generic_kernel_table();
const KernelTable *avx2_kernel_table();
const KernelTable *avx512_kernel_table();
const KernelTable *avx512amx_kernel_table();
// Whether this CPU runs kernel set t: the features dispatch requires of it,
// less any hidden by APPROXMUL_HIDE_CPU_FEATURES.
bool cpu_runs(const KernelTable &t);

// The table chosen for this process (APPROXMUL_ISA or the CPU's best);
// throws APPROXMUL_ERR_UNSUPPORTED when APPROXMUL_ISA names one the CPU lacks.
const KernelTable &selected_kernels();

}  // namespace approxmul::kernels
