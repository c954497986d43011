// approxmul_conv2d under fuzz: NCHW shapes (0, negative, huge, mismatched),
// strides of x, w and out (negative, zero, huge), stride/padding/dilation
// (< 1, negative, leaving no output), groups (not dividing the channels),
// dtypes, zero points, NULL data pointers and NULL shape/stride arrays,
// thread counts and tables with extreme entries. Successful results are
// compared bit-exactly with a direct 128-bit reference computed here
// (padded taps hold x_zero_point's code and go through the multiplier);
// failures must leave the output untouched. Then the same convolution
// with an output stage, against approxmul_requantize of its output.
#include <cmath>
#include <optional>

#include "fuzz_common.hpp"

using namespace fuzz;

namespace {

// The geometry as the caller passes it (9 arrays and groups).
struct Geometry {
    int64_t x_shape[4], w_shape[4], out_shape[4];
    int64_t stride[2], padding[2], dilation[2];
    int64_t groups;
};

// Output height/width, or -1 when the padded size leaves no output or the
// arguments are invalid; computed in 128 bits.
i128 output_size(i128 size, i128 kernel, i128 stride, i128 padding, i128 dilation) {
    if (stride < 1 || dilation < 1 || padding < 0 || kernel < 1 || size < 0) return -1;
    const i128 span = dilation * (kernel - 1) + 1, room = size + 2 * padding;
    if (room < span) return -1;
    return (room - span) / stride + 1;
}

// Whether the geometry is one the ABI documents as valid (sizes aside).
bool consistent(const Geometry &g) {
    for (int d = 0; d < 4; ++d)
        if (g.x_shape[d] < 0 || g.w_shape[d] < 0 || g.out_shape[d] < 0) return false;
    if (g.groups < 1) return false;
    const int64_t C = g.x_shape[1], O = g.w_shape[0];
    if (C % g.groups != 0 || O % g.groups != 0 || g.w_shape[1] != C / g.groups) return false;
    for (int d = 0; d < 2; ++d) {
        const i128 size = output_size(g.x_shape[2 + d], g.w_shape[2 + d], g.stride[d],
                                      g.padding[d], g.dilation[d]);
        if (size < 1 || size != g.out_shape[2 + d]) return false;
    }
    return g.out_shape[0] == g.x_shape[0] && g.out_shape[1] == O;
}

// A small geometry, valid more often than not, then now and then broken; or
// rarely a large one, for the parallel paths (pick_large): jobs on several
// threads, or one GEMM at a time on all of them.
Geometry pick_geometry(FuzzedDataProvider &in, Model &m, std::optional<Large> &large) {
    Geometry g{};
    int64_t G = in.ConsumeIntegralInRange(1, 3), Cg = in.ConsumeIntegralInRange(0, 3),
            Og = in.ConsumeIntegralInRange(0, 3);
    // one byte: N is its value mod 4, 255 asks for a large problem (seed
    // inputs keep their cases)
    const int n_byte = in.ConsumeIntegralInRange(0, 255);
    int64_t N = n_byte % 4;
    if (n_byte == 255) {
        large = pick_large(in, m);
        G = in.ConsumeIntegralInRange(1, 2);
        Cg = in.ConsumeIntegralInRange(4, 24);
        Og = in.ConsumeIntegralInRange(2, 24);
    }
    int64_t K[2], H[2];
    for (int d = 0; d < 2; ++d) {
        K[d] = in.ConsumeIntegralInRange(0, 31) == 0 ? 0 : in.ConsumeIntegralInRange(1, 3);
        H[d] = in.ConsumeIntegralInRange(0, 9);
        g.stride[d] = in.ConsumeIntegralInRange(1, 3);
        g.padding[d] = in.ConsumeIntegralInRange(0, 3);
        g.dilation[d] = in.ConsumeIntegralInRange(1, 3);
    }
    // pointwise layers (1x1, stride 1, no padding) a quarter of the time:
    // conv2d reads their x and writes their out in place (pixel_chain)
    if (in.ConsumeIntegralInRange(0, 3) == 0)
        for (int d = 0; d < 2; ++d) K[d] = 1, g.stride[d] = 1, g.padding[d] = 0;
    g.groups = G;
    i128 out[2];
    if (large) {  // images of 8 to 22 pixels a side, as many as make the work
        for (int d = 0; d < 2; ++d) {
            H[d] += 8 + in.ConsumeIntegralInRange(0, 5);
            out[d] = output_size(H[d], K[d], g.stride[d], g.padding[d], g.dilation[d]);
        }
        const i128 per_image = G * Og * std::max<i128>(out[0], 0) * std::max<i128>(out[1], 0) *
                               Cg * K[0] * K[1];
        // a quarter to half the GEMM's: conv2d runs jobs in parallel from 256
        // output pixels on, and smaller buffers stay within kMaxBufferBytes
        const int64_t work = in.ConsumeIntegralInRange(large->low / 4, large->high / 4);
        N = static_cast<int64_t>(std::clamp<i128>(work / std::max<i128>(per_image, 1), 1, 64));
    }
    for (;;) {  // keep the work (and so the reference) small
        for (int d = 0; d < 2; ++d)
            out[d] = output_size(H[d], K[d], g.stride[d], g.padding[d], g.dilation[d]);
        const i128 work = N * G * Og * std::max<i128>(out[0], 0) * std::max<i128>(out[1], 0) *
                          Cg * K[0] * K[1];
        if (work <= (large ? large->high / 4 : 20000)) break;
        H[0] /= 2, H[1] /= 2, N = std::min<int64_t>(N, 1);
    }
    const int64_t xs[4] = {N, G * Cg, H[0], H[1]}, ws[4] = {G * Og, Cg, K[0], K[1]},
                  os[4] = {N, G * Og, static_cast<int64_t>(std::max<i128>(out[0], 0)),
                           static_cast<int64_t>(std::max<i128>(out[1], 0))};
    std::copy(xs, xs + 4, g.x_shape);
    std::copy(ws, ws + 4, g.w_shape);
    std::copy(os, os + 4, g.out_shape);
    // Breakages, each now and then.
    if (in.ConsumeIntegralInRange(0, 15) == 0) g.groups = in.ConsumeIntegralInRange(-1, 6);
    for (int d = 0; d < 2; ++d) {
        if (in.ConsumeIntegralInRange(0, 31) == 0) g.stride[d] = in.ConsumeIntegralInRange(-1, 1);
        if (in.ConsumeIntegralInRange(0, 31) == 0) g.dilation[d] = in.ConsumeIntegralInRange(-1, 1);
        if (in.ConsumeIntegralInRange(0, 31) == 0) g.padding[d] = in.ConsumeIntegralInRange(-2, -1);
    }
    if (in.ConsumeIntegralInRange(0, 15) == 0)
        g.out_shape[in.ConsumeIntegralInRange(0, 3)] += in.ConsumeBool() ? 1 : -1;
    if (in.ConsumeIntegralInRange(0, 31) == 0) g.w_shape[1] += in.ConsumeBool() ? 1 : -1;
    if (in.ConsumeIntegralInRange(0, 15) == 0) {  // any one value, often huge or negative
        int64_t *slots[] = {&g.x_shape[0], &g.x_shape[1], &g.x_shape[2], &g.x_shape[3],
                            &g.w_shape[0], &g.w_shape[1], &g.w_shape[2], &g.w_shape[3],
                            &g.out_shape[0], &g.out_shape[1], &g.out_shape[2], &g.out_shape[3],
                            &g.stride[0], &g.stride[1], &g.padding[0], &g.padding[1],
                            &g.dilation[0], &g.dilation[1], &g.groups};
        *slots[in.ConsumeIntegralInRange<size_t>(0, std::size(slots) - 1)] =
            in.ConsumeIntegral<int64_t>();
    }
    return g;
}

// The output stage on a conv2d that succeeded: approxmul_conv2d_requantize
// (or _dequantize) with fuzzed parameters, some invalid, must give the
// status and the bytes approxmul_requantize (_dequantize) gives on that
// conv2d's output, and write nothing when it fails.
void check_output_stage(FuzzedDataProvider &in, const Model &m, const Geometry &g,
                        const Tensor &x, const Tensor &w, int64_t x_zero, int64_t w_zero,
                        const Tensor &out) {
    const int64_t N = g.out_shape[0], O = g.out_shape[1], P = g.out_shape[2] * g.out_shape[3];
    std::vector<int64_t> acc(static_cast<size_t>(N * O * P));
    out.for_each([&](const int64_t *o) {
        acc[static_cast<size_t>((o[0] * O + o[1]) * P + o[2] * g.out_shape[3] + o[3])] = out.get(o);
    });
    std::vector<int32_t> bias(static_cast<size_t>(O)), mantissa(bias), shift(bias);
    for (size_t c = 0; c < bias.size(); ++c) {
        bias[c] = in.ConsumeBool() ? in.ConsumeIntegral<int32_t>()
                                   : in.ConsumeIntegralInRange<int32_t>(-1000, 1000);
        mantissa[c] = in.ConsumeIntegralInRange<int32_t>(in.ConsumeIntegralInRange(0, 31) == 0 ? -1 : 0,
                                                         INT32_MAX);
        shift[c] = in.ConsumeIntegralInRange<int32_t>(-32, in.ConsumeIntegralInRange(0, 31) == 0 ? 31 : 2);
    }
    const approxmul_dtype codes[4] = {APPROXMUL_INT8, APPROXMUL_UINT8, APPROXMUL_INT16,
                                      APPROXMUL_UINT16};
    const approxmul_dtype code = codes[in.ConsumeIntegralInRange(0, 3)];
    const int32_t lo = code == APPROXMUL_INT8 ? -128 : code == APPROXMUL_INT16 ? -32768 : 0;
    const int32_t hi = code == APPROXMUL_INT8 ? 127 : code == APPROXMUL_UINT8 ? 255
                       : code == APPROXMUL_INT16 ? 32767 : 65535;
    const int32_t qmin = in.ConsumeIntegralInRange(lo - (in.ConsumeIntegralInRange(0, 31) == 0), hi);
    const int32_t qmax = in.ConsumeIntegralInRange(qmin, hi + (in.ConsumeIntegralInRange(0, 31) == 0));
    const int32_t zero_point = in.ConsumeIntegralInRange(lo, hi);
    // an int, cast at each call: an enum object holding 7 may not even be loaded
    const int rounding = in.ConsumeIntegralInRange(0, 31) == 0 ? 7 : in.ConsumeIntegralInRange(1, 2);
    const bool real = in.ConsumeBool(), real64 = in.ConsumeBool();
    const double scale = in.ConsumeIntegralInRange(0, 31) == 0 ? 0.0 : std::ldexp(1.0 + in.ConsumeIntegralInRange(0, 99) / 100.0,
                                                                                in.ConsumeIntegralInRange(-20, 4));
    const approxmul_real_type real_type = real64 ? APPROXMUL_FLOAT64 : APPROXMUL_FLOAT32;
    const int32_t *bias_p = in.ConsumeIntegralInRange(0, 7) == 0 ? nullptr : bias.data();
    const size_t item = real ? (real64 ? 8 : 4) : (code == APPROXMUL_INT8 || code == APPROXMUL_UINT8 ? 1 : 2);
    std::vector<unsigned char> want(acc.size() * item + 1, 0x5a), got(want);
    approxmul_status want_status, got_status;
    if (real) {
        want_status = checked(approxmul_requantize_dequantize(
            N, O, P, APPROXMUL_INT64, acc.data(), bias_p, mantissa.data(), shift.data(), zero_point,
            qmin, qmax, static_cast<approxmul_rounding>(rounding), code, scale, real_type, want.data()));
        got_status = checked(approxmul_conv2d_requantize_dequantize(
            m.handle, static_cast<approxmul_dtype>(x.dtype), x.data, x.shape, x.strides,
            static_cast<approxmul_dtype>(w.dtype), w.data, w.shape, w.strides, g.stride,
            g.padding, g.dilation, g.groups, x_zero, w_zero, bias_p, mantissa.data(),
            shift.data(), zero_point, qmin, qmax, static_cast<approxmul_rounding>(rounding), code, scale, real_type, got.data(),
            g.out_shape));
    } else {
        want_status = checked(approxmul_requantize(
            N, O, P, APPROXMUL_INT64, acc.data(), bias_p, mantissa.data(), shift.data(), zero_point,
            qmin, qmax, static_cast<approxmul_rounding>(rounding), code, want.data()));
        got_status = checked(approxmul_conv2d_requantize(
            m.handle, static_cast<approxmul_dtype>(x.dtype), x.data, x.shape, x.strides,
            static_cast<approxmul_dtype>(w.dtype), w.data, w.shape, w.strides, g.stride,
            g.padding, g.dilation, g.groups, x_zero, w_zero, bias_p, mantissa.data(),
            shift.data(), zero_point, qmin, qmax, static_cast<approxmul_rounding>(rounding), code, got.data(), g.out_shape));
    }
    expect(got_status == want_status, "output stage status differs from requantize's", got_status);
    if (got_status != APPROXMUL_OK)
        expect(std::all_of(got.begin(), got.end(), [](unsigned char b) { return b == 0x5a; }),
               "output written by a failing output stage", got_status);
    else
        expect(got == want, "output stage differs from conv2d then requantize");
    if (!real || got_status != APPROXMUL_OK || x.elements == 0) return;
    // approxmul_conv2d_real from x's real values (code - x_zero) 2^k, which
    // quantize back to the codes exactly, laid out NCHW or channels-last: the
    // same bytes; a NaN, an infinity or codes beyond the multiplier's: refused,
    // nothing written
    const int64_t *s = x.shape;
    const bool channels_last = in.ConsumeBool(), x64 = in.ConsumeBool();
    const int64_t nchw[4] = {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1};
    const int64_t nhwc[4] = {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
    const int64_t *dense = channels_last ? nhwc : nchw;
    const double x_scale = std::ldexp(1.0, in.ConsumeIntegralInRange(-8, 8));
    std::vector<double> values(static_cast<size_t>(s[0] * s[1] * s[2] * s[3]));
    x.for_each([&](const int64_t *i) {
        int64_t at = 0;
        for (int d = 0; d < 4; ++d) at += i[d] * dense[d];
        values[static_cast<size_t>(at)] = static_cast<double>(x.get(i) - x_zero) * x_scale;
    });
    const int fault = in.ConsumeIntegralInRange(0, 7);  // 1 NaN, 2 infinity, 3 qmax, 4 qmin
    if (fault == 1 || fault == 2)
        values[in.ConsumeIntegralInRange<size_t>(0, values.size() - 1)] =
            fault == 1 ? std::nan("") : -HUGE_VAL;
    std::vector<float> values32(values.begin(), values.end());  // exact: codes have <= 16 bits
    const int64_t x_qmin = m.min_operand() - (fault == 4), x_qmax = m.max_operand() + (fault == 3);
    std::vector<unsigned char> from_real(got.size(), 0x5a);
    const approxmul_status status = checked(approxmul_conv2d_real(
        m.handle, x64 ? APPROXMUL_FLOAT64 : APPROXMUL_FLOAT32,
        x64 ? static_cast<const void *>(values.data()) : values32.data(), x.shape, dense,
        x_scale, static_cast<int32_t>(x_qmin), static_cast<int32_t>(x_qmax),
        static_cast<approxmul_dtype>(x.dtype), static_cast<approxmul_dtype>(w.dtype), w.data,
        w.shape, w.strides, g.stride, g.padding, g.dilation, g.groups, x_zero, w_zero, bias_p,
        mantissa.data(), shift.data(), zero_point, qmin, qmax,
        static_cast<approxmul_rounding>(rounding), code, scale, real_type, from_real.data(),
        g.out_shape));
    const approxmul_status expected = fault == 1 || fault == 2 ? APPROXMUL_ERR_INVALID_ARGUMENT
                                      : fault == 3 || fault == 4 ? APPROXMUL_ERR_OUT_OF_RANGE
                                                                 : APPROXMUL_OK;
    expect(status == expected, "conv2d_real status", status);
    if (status == APPROXMUL_OK)
        expect(from_real == got, "conv2d_real differs from quantize then conv2d");
    else
        expect(std::all_of(from_real.begin(), from_real.end(),
                           [](unsigned char b) { return b == 0x5a; }),
               "output written by a failing conv2d_real", status);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    pick_threads(in);
    auto m = make_model(in);
    std::optional<Large> large;
    const Geometry g = pick_geometry(in, *m, large);
    const bool geometry_ok = consistent(g);
    const int64_t K = geometry_ok ? g.w_shape[1] * g.w_shape[2] * g.w_shape[3] : 0;

    Tensor x, w, out;
    x.dtype = pick_operand_dtype(in, *m);
    w.dtype = pick_operand_dtype(in, *m);
    std::copy(g.x_shape, g.x_shape + 4, x.shape);
    std::copy(g.w_shape, g.w_shape + 4, w.shape);
    std::copy(g.out_shape, g.out_shape + 4, out.shape);
    const bool null_multiplier = in.ConsumeIntegralInRange(0, 31) == 0;
    int64_t x_zero = 0, w_zero = 0;
    if (in.ConsumeBool()) {
        x_zero = in.ConsumeIntegralInRange(m->min_operand() - 1, m->max_operand() + 1);
        w_zero = in.ConsumeIntegralInRange(m->min_operand() - 1, m->max_operand() + 1);
    }
    approxmul_dtype acc = APPROXMUL_INT64;
    const approxmul_status acc_status =
        checked(approxmul_accumulator_dtype(m->handle, K, x_zero, w_zero, &acc));
    const int out_choice = in.ConsumeIntegralInRange(0, 7);
    out.dtype = out_choice == 0 ? in.ConsumeIntegralInRange(-1, 8)
                : out_choice == 1 ? APPROXMUL_INT32
                : out_choice <= 4 ? acc
                                  : APPROXMUL_INT64;

    bool all_valid = geometry_ok && !null_multiplier && acc_status == APPROXMUL_OK;
    bool operands_valid = true;
    for (Tensor *t : {&x, &w}) {
        pick_strides(*t, in);
        allocate(*t);
        operands_valid &= operand_dtype_ok(t->dtype, *m);
        operands_valid &= large ? fill_tensor(*t, *m, random_operand(*large, *m))
                                    : fill_tensor(*t, *m, fuzzed_operand(in, *m));
        all_valid &= t->addressable;
    }
    all_valid &= operands_valid;
    pick_strides(out, in);
    allocate(out);
    all_valid &= out.addressable && ordinary_output(out) &&
                 (out.dtype == APPROXMUL_INT64 || (out.dtype == APPROXMUL_INT32 && acc == APPROXMUL_INT32));
    // NULL data pointers: an error unless the tensor is empty
    for (Tensor *t : {&x, &w, &out})
        if (in.ConsumeIntegralInRange(0, 31) == 0) {
            t->data = nullptr;
            all_valid &= t->empty;
        }
    // NULL shape, stride and parameter arrays: always an error
    const int64_t *arrays[9] = {x.shape, x.strides, w.shape, w.strides, g.stride,
                                g.padding, g.dilation, out.shape, out.strides};
    for (auto &array : arrays)
        if (in.ConsumeIntegralInRange(0, 63) == 0) {
            array = nullptr;
            all_valid = false;
        }
    const bool arrays_given = std::all_of(std::begin(arrays), std::end(arrays),
                                          [](const int64_t *p) { return p != nullptr; });
    // A huge view that could exist is the caller's promise the library must
    // trust (it would read it): no real memory here, so no call.
    for (const Tensor *t : {&x, &w, &out})
        if (!t->addressable && !t->impossible && t->data != nullptr && t->size() != 0) return 0;
    std::fill(out.storage.begin(), out.storage.end(), 0x5a);
    const std::vector<unsigned char> before = out.storage;

    const approxmul_status status = checked(approxmul_conv2d(
        null_multiplier ? nullptr : m->handle,
        static_cast<approxmul_dtype>(x.dtype), x.data, arrays[0], arrays[1],
        static_cast<approxmul_dtype>(w.dtype), w.data, arrays[2], arrays[3],
        arrays[4], arrays[5], arrays[6], g.groups, x_zero, w_zero,
        static_cast<approxmul_dtype>(out.dtype), out.data, arrays[7], arrays[8]));

    // The shape function makes conv2d's checks of the same arguments:
    // whatever it refuses conv2d refuses, and an accepted conv2d's output
    // has exactly the shape it reports (the formula, in 128 bits, here).
    if (arrays[0] != nullptr && arrays[2] != nullptr && arrays[4] != nullptr &&
        arrays[5] != nullptr && arrays[6] != nullptr) {
        int64_t shape[4] = {-7, -7, -7, -7};
        approxmul_dtype dtype = APPROXMUL_INT8;
        const approxmul_status shape_status = checked(approxmul_conv2d_output_shape(
            null_multiplier ? nullptr : m->handle, arrays[0], arrays[2], arrays[4], arrays[5],
            arrays[6], g.groups, x_zero, w_zero, shape, &dtype));
        if (shape_status != APPROXMUL_OK) {
            expect(status != APPROXMUL_OK, "conv2d accepted what its shape check refuses");
            expect(std::all_of(shape, shape + 4, [](int64_t v) { return v == -7; }),
                   "output shape written by a failing call", shape_status);
        } else {
            for (int d = 0; d < 2; ++d)
                expect(shape[2 + d] == output_size(g.x_shape[2 + d], g.w_shape[2 + d],
                                                   g.stride[d], g.padding[d], g.dilation[d]),
                       "output size differs from the formula");
            expect(shape[0] == g.x_shape[0] && shape[1] == g.w_shape[0], "N or O misreported");
            if (status == APPROXMUL_OK) {
                expect(std::equal(shape, shape + 4, g.out_shape), "conv2d accepted another shape");
                // an int32 output is accepted only where the sums fit it
                if (!null_multiplier && out.dtype == APPROXMUL_INT32)
                    expect(dtype == APPROXMUL_INT32, "int32 output accepted, int64 reported");
            }
        }
    }
    for (const Tensor *t : {&x, &w})
        expect(t->elements <= kMaxWalkedElements || !geometry_ok, "harness: huge consistent operand");
    if (all_valid) expect(status == APPROXMUL_OK, "valid conv2d refused", status);
    for (const Tensor *t : {&x, &w, &out})
        if (t->impossible && arrays_given)
            expect(status != APPROXMUL_OK, "impossible view accepted");
    if (status != APPROXMUL_OK) {
        expect(out.storage == before, "output written by a failing call", status);
        return 0;
    }
    expect(arrays_given && !null_multiplier, "NULL array or multiplier accepted");
    expect(geometry_ok, "inconsistent geometry accepted");
    expect(operands_valid && m->in_range(x_zero) && m->in_range(w_zero),
           "operand dtype or value outside the multiplier accepted");
    expect(out.dtype == APPROXMUL_INT64 || (out.dtype == APPROXMUL_INT32 && acc == APPROXMUL_INT32),
           "output type accepted that can overflow", out.dtype);
    expect(!x.impossible && !w.impossible && !out.impossible, "impossible view accepted");
    expect_only_view_written(out);
    const int64_t Cg = g.w_shape[1], Og = g.w_shape[0] / g.groups;
    const int64_t H = g.x_shape[2], W = g.x_shape[3];
    out.for_each([&](const int64_t *o) {
        const int64_t n = o[0], oc = o[1], group = oc / Og;
        i128 sum = 0;
        for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < g.w_shape[2]; ++i)
                for (int64_t j = 0; j < g.w_shape[3]; ++j) {
                    const int64_t yy = o[2] * g.stride[0] - g.padding[0] + i * g.dilation[0];
                    const int64_t xx = o[3] * g.stride[1] - g.padding[1] + j * g.dilation[1];
                    const int64_t xi[4] = {n, group * Cg + c, yy, xx}, wi[4] = {oc, c, i, j};
                    const bool inside = yy >= 0 && yy < H && xx >= 0 && xx < W;
                    const int64_t X = inside ? x.get(xi) : x_zero, Wv = w.get(wi);
                    sum += static_cast<i128>(m->product(X, Wv)) - static_cast<i128>(w_zero) * X -
                           static_cast<i128>(x_zero) * Wv + static_cast<i128>(x_zero) * w_zero;
                }
        if (static_cast<i128>(out.get(o)) != sum) {  // the case, for a reproduction
            std::fprintf(stderr, "x %lldx%lldx%lldx%lld strides %lld,%lld,%lld,%lld dtype %d; "
                         "w %lldx%lldx%lldx%lld strides %lld,%lld,%lld,%lld dtype %d; stride %lld,%lld "
                         "pad %lld,%lld dil %lld,%lld groups %lld zp %lld,%lld; out dtype %d; "
                         "got %lld want %lld\n",
                         (long long)g.x_shape[0], (long long)g.x_shape[1], (long long)g.x_shape[2],
                         (long long)g.x_shape[3], (long long)x.strides[0], (long long)x.strides[1],
                         (long long)x.strides[2], (long long)x.strides[3], x.dtype,
                         (long long)g.w_shape[0], (long long)g.w_shape[1], (long long)g.w_shape[2],
                         (long long)g.w_shape[3], (long long)w.strides[0], (long long)w.strides[1],
                         (long long)w.strides[2], (long long)w.strides[3], w.dtype,
                         (long long)g.stride[0], (long long)g.stride[1], (long long)g.padding[0],
                         (long long)g.padding[1], (long long)g.dilation[0], (long long)g.dilation[1],
                         (long long)g.groups, (long long)x_zero, (long long)w_zero, out.dtype,
                         (long long)out.get(o), (long long)sum);
        }
        expect(static_cast<i128>(out.get(o)) == sum, "conv2d result differs from reference",
               static_cast<long long>(((n * g.out_shape[1] + oc) * g.out_shape[2] + o[2]) *
                                          g.out_shape[3] + o[3]));
    });
    check_output_stage(in, *m, g, x, w, x_zero, w_zero, out);
    return 0;
}
