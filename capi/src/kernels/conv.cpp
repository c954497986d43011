// Batched matmul and conv2d, both as sequences of 2-D matmuls through the
// dispatch point, so every plan and instruction set serves them.
//
// conv2d is an implicit im2col: for one group and block of output pixels
// taken across the whole batch (image after image), the receptive fields
// are gathered into a bounded buffer (C/groups*KH*KW taps x pixels,
// padded taps holding the input zero point) and multiplied by the group's
// weights, activations as the multiplier's first operand; the GEMM drivers
// stream the long pixel dimension through their vector lanes. Workspace per
// worker: one such block, its O/groups x pixels outputs and one padded
// image of one group, independent of the batch size. Stride 1 indexes
// pixels over the padded width (gather_wide: one copy per tap and image);
// other strides gather per output-row segment (gather). Pointwise layers
// (1x1, stride 1, no padding) skip the gather where x allows: the GEMM
// reads x in place and may write out directly (multiply_pointwise).
#include <algorithm>
#include <array>
#include <limits>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../core/scratch.hpp"
#include "../core/threads.hpp"
#include "common.hpp"
#include "drivers.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace approxmul::kernels {

namespace {

const char *offset_ptr(const void *data, int64_t elements, approxmul_dtype dtype) {
    return static_cast<const char *>(data) + elements * static_cast<int64_t>(dtype_size(dtype));
}

// A model function may fail part-way (a user callback): such multipliers
// compute into a scratch copy of the output, written out only on success.
bool needs_staging(const Multiplier &m) { return m.plan() == Plan::Function; }

// One image's run of sums for one channel into the target tensor: base is
// the (n, channel) offset; pixel >= 0 when the plane is contiguous (the run
// starts there), else pixel_offsets gives each pixel's place.
// Element loops for the short runs of small images: a library memcpy or
// memset call per tap and output row cost more than the copy itself (8x8
// images: two calls per 8 bytes, a third of a 64->64 conv), and GCC turns
// plain copy loops back into such calls unless told not to.
#if defined(__GNUC__) && !defined(__clang__)
#define APPROXMUL_NO_LIBCALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define APPROXMUL_NO_LIBCALLS
#endif

// 8 to 16 bytes as two overlapping 8-byte moves (an 8x8 image's rows: one)
inline void copy_short(void *dst, const void *src, size_t bytes) {
    std::memcpy(dst, src, 8);
    std::memcpy(static_cast<char *>(dst) + bytes - 8, static_cast<const char *>(src) + bytes - 8, 8);
}

template <typename T>
APPROXMUL_NO_LIBCALLS void copy_run(T *dst, const T *src, int64_t count, int64_t step) {
    const auto bytes = static_cast<size_t>(count) * sizeof(T);
    if (step == 1 && count >= 64) {
        std::memcpy(dst, src, bytes);
    } else if (step == 1 && bytes >= 8 && bytes <= 16) {
        copy_short(dst, src, bytes);
    } else if (step == 1) {
        for (int64_t t = 0; t < count; ++t) dst[t] = src[t];
    } else {
        for (int64_t t = 0; t < count; ++t) dst[t] = src[t * step];
    }
}

// count elements of item bytes (1, 2, 4 or 8), through copy_run
void copy_bytes(char *dst, const char *src, int64_t count, int64_t item) {
    auto copy = [&](auto element) {
        using T = decltype(element);
        copy_run(reinterpret_cast<T *>(dst), reinterpret_cast<const T *>(src), count, 1);
    };
    switch (item) {
    case 1: copy(uint8_t{}); break;
    case 2: copy(uint16_t{}); break;
    case 4: copy(uint32_t{}); break;
    default: copy(uint64_t{}); break;
    }
}

template <typename T>
APPROXMUL_NO_LIBCALLS void fill_run(T *dst, int64_t count, T value) {
    for (int64_t t = 0; t < count; ++t) dst[t] = value;
}

// sum + term; int32 pairs add modulo 2^32, which is exact whenever the
// result fits int32 (conv2d's int32 outputs are checked to), and keeps the
// scatter in 32-bit lanes
template <typename Sum, typename Term>
Sum add_term(Sum sum, Term term) {
    if constexpr (std::is_same_v<Sum, int32_t> && std::is_same_v<Term, int32_t>)
        return static_cast<int32_t>(static_cast<uint32_t>(sum) + static_cast<uint32_t>(term));
    else
        return sum + term;
}

template <typename Sum, typename Term>
void scatter_run(const Sum *src, const Term *term, int64_t count, int64_t base,
                 const int64_t *pixel_offsets, int64_t pixel, const TensorView &target) {
    auto write = [&](auto *out) {
        using Out = std::remove_reference_t<decltype(*out)>;
        if (pixel >= 0 && term != nullptr) {
            auto *dst = out + base + pixel;
            for (int64_t t = 0; t < count; ++t) dst[t] = static_cast<Out>(add_term(src[t], term[t]));
        } else if (pixel >= 0) {
            auto *dst = out + base + pixel;
            for (int64_t t = 0; t < count; ++t) dst[t] = static_cast<Out>(src[t]);
        } else {
            for (int64_t t = 0; t < count; ++t)
                out[base + pixel_offsets[t]] =
                    static_cast<Out>(add_term(src[t], term != nullptr ? term[t] : Term{0}));
        }
    };
    if (target.dtype == APPROXMUL_INT32)
        write(static_cast<int32_t *>(const_cast<void *>(target.data)));
    else
        write(static_cast<int64_t *>(const_cast<void *>(target.data)));
}

// The type of the GEMM's sums in a conv2d: int64 for failing-capable
// models (staged); else int32 when the partial sum the GEMM produces fits it
// (with the x cross term folded out it is not the output value, so the
// output's own type does not decide).
approxmul_dtype sum_dtype(const Conv2dProblem &p, const Multiplier &m, int64_t inner,
                          bool fold_x_sums) {
    if (needs_staging(m) || p.out.dtype == APPROXMUL_INT64) return APPROXMUL_INT64;
    return fold_x_sums ? accumulator_dtype(m, inner, p.x_zero_point, 0) : p.out.dtype;
}

}  // namespace

void bmm(const BmmProblem &p) {
    const MatmulProblem &base = p.matrices;
    std::vector<int64_t> scratch;
    MatmulProblem first = base;
    int64_t c_batch_stride = p.c_batch_stride;
    const bool staged = needs_staging(*base.multiplier);
    if (staged) {
        scratch.resize(static_cast<size_t>(p.batch * base.rows * base.cols));
        first.c = MatrixView{base.c.name, APPROXMUL_INT64, scratch.data(), base.rows, base.cols,
                             base.cols, 1};
        c_batch_stride = base.rows * base.cols;
    }
    // Many small matrices: one per thread; few large ones: threads inside each.
    const int threads = num_threads();
    const bool outer = p.batch >= 2 * threads &&
                       base.rows * base.cols * std::max<int64_t>(base.inner, 1) < (int64_t{1} << 22);
    auto one = [&](int64_t t, int inner_threads) {
        MatmulProblem q = first;
        if (base.inner > 0) {  // else A and B are empty (may be NULL): no offsets into them
            q.a.data = offset_ptr(base.a.data, t * p.a_batch_stride, base.a.dtype);
            q.b.data = offset_ptr(base.b.data, t * p.b_batch_stride, base.b.dtype);
        }
        q.c.data = offset_ptr(first.c.data, t * c_batch_stride, first.c.dtype);
        q.threads = inner_threads;
        matmul(q);
    };
    if (outer)
        parallel_for(p.batch, threads, [&](int64_t t, int) { one(t, 1); });
    else
        for (int64_t t = 0; t < p.batch; ++t) one(t, 0);
    if (staged)
        for (int64_t t = 0; t < p.batch; ++t)
            for (int64_t i = 0; i < base.rows; ++i)
                for (int64_t j = 0; j < base.cols; ++j) {
                    MatrixView c = base.c;
                    c.data = offset_ptr(base.c.data, t * p.c_batch_stride, base.c.dtype);
                    store_value(c, i, j, scratch[static_cast<size_t>((t * base.rows + i) *
                                                                     base.cols + j)]);
                }
}

Shape4 checked_output_shape(const Conv2dProblem &p) {
    for (const TensorView *t : {&p.x, &p.w}) t->size();  // negative sizes, overflow
    const char *axis[2] = {"height", "width"};
    for (int d = 0; d < 2; ++d) {
        if (p.stride[d] < 1)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "stride: %lld along %s; must be >= 1",
                 static_cast<long long>(p.stride[d]), axis[d]);
        if (p.dilation[d] < 1)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "dilation: %lld along %s; must be >= 1",
                 static_cast<long long>(p.dilation[d]), axis[d]);
        if (p.padding[d] < 0)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "padding: %lld along %s is negative",
                 static_cast<long long>(p.padding[d]), axis[d]);
    }
    const int64_t groups = p.groups;
    if (groups < 1)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "groups: %lld; must be >= 1",
             static_cast<long long>(groups));
    const int64_t C = p.x.shape[1], O = p.w.shape[0];
    if (C % groups != 0 || O % groups != 0)
        fail(APPROXMUL_ERR_SHAPE,
             "groups: %lld does not divide the input channels (%lld) and output channels (%lld)",
             static_cast<long long>(groups), static_cast<long long>(C), static_cast<long long>(O));
    if (p.w.shape[1] != C / groups)
        fail(APPROXMUL_ERR_SHAPE, "w: %lld input channels per group, x has %lld / %lld = %lld",
             static_cast<long long>(p.w.shape[1]), static_cast<long long>(C),
             static_cast<long long>(groups), static_cast<long long>(C / groups));
    if (p.w.shape[2] < 1 || p.w.shape[3] < 1)
        fail(APPROXMUL_ERR_SHAPE, "w: kernel %lld x %lld is empty",
             static_cast<long long>(p.w.shape[2]), static_cast<long long>(p.w.shape[3]));
    Shape4 shape = {p.x.shape[0], O, 0, 0};
    for (int d = 0; d < 2; ++d) {
        const int64_t size = p.x.shape[2 + d], kernel = p.w.shape[2 + d];
        const int64_t span = checked_add(
            checked_mul(p.dilation[d], kernel - 1, "dilation*(kernel-1)"), 1, "kernel span");
        const int64_t room =
            checked_add(size, checked_mul(2, p.padding[d], "2*padding"), "padded size");
        if (room < span)
            fail(APPROXMUL_ERR_SHAPE,
                 "the %s leaves no output: padded size %lld < dilated kernel span %lld", axis[d],
                 static_cast<long long>(room), static_cast<long long>(span));
        shape[2 + d] = (room - span) / p.stride[d] + 1;
    }
    const int64_t inner =
        checked_mul(p.w.shape[1], checked_mul(p.w.shape[2], p.w.shape[3], "w"), "w");
    check_sizes(checked_mul(shape[0], checked_mul(shape[2], shape[3], "out"), "out"), O, inner);
    if (p.multiplier != nullptr) {  // nullptr: shape inference only
        check_zero_point(p.x_zero_point, "x_zero_point", *p.multiplier);
        check_zero_point(p.w_zero_point, "w_zero_point", *p.multiplier);
    }
    return shape;
}

void check(const Conv2dProblem &p) {
    p.out.size();  // negative sizes, overflow
    const Shape4 expected = checked_output_shape(p);
    const int64_t *got = p.out.shape;
    if (!std::equal(expected.begin(), expected.end(), got))
        fail(APPROXMUL_ERR_SHAPE,
             "out_shape: (%lld, %lld, %lld, %lld), the convolution gives (%lld, %lld, %lld, %lld)",
             static_cast<long long>(got[0]), static_cast<long long>(got[1]),
             static_cast<long long>(got[2]), static_cast<long long>(got[3]),
             static_cast<long long>(expected[0]), static_cast<long long>(expected[1]),
             static_cast<long long>(expected[2]), static_cast<long long>(expected[3]));
    const Multiplier &m = *p.multiplier;
    check_tensor_operand(p.x, m);
    check_tensor_operand(p.w, m);
    check_output_type(p.out.name, p.out.dtype, m, p.w.shape[1] * p.w.shape[2] * p.w.shape[3],
                      p.x_zero_point, p.w_zero_point);
    if (p.stage == nullptr) {
        check_tensor_output(p.out, p.x, p.w);
        return;
    }
    // the stage's contiguous output instead of the accumulators
    const Conv2dOutputStage &s = *p.stage;
    const int64_t count = p.out.size();
    if (count == 0) return;
    require_pointer(s.out, p.out.name);
    const auto lo = reinterpret_cast<intptr_t>(s.out);
    const int64_t item = s.real_bytes != 0 ? s.real_bytes : static_cast<int64_t>(dtype_size(s.code_dtype));
    const intptr_t hi = lo + static_cast<intptr_t>(checked_mul(count, item, p.out.name));
    for (const TensorView *input : {&p.x, &p.w}) {
        intptr_t in_lo, in_hi;
        input->byte_range(in_lo, in_hi);
        if (in_lo < in_hi && lo < in_hi && in_lo < hi)
            fail(APPROXMUL_ERR_ALIASING, "%s overlaps input %s", p.out.name, input->name);
    }
}

namespace {

// The per-row path pads images (gather_padded) up to this size per image
// and group; larger ones are gathered with clamps, as the padded copy would
// cost each workspace that much memory.
constexpr int64_t kPaddedRowBytes = int64_t{4} << 20;

// One conv2d call: the problem's sizes, the weights regrouped as each
// group's GEMM operand, where sums go, and the im2col gather tables. Jobs
// (a group x a block of output pixels across the batch) run through
// run_job: gather, matmul, scatter.
class Conv2dRun {
public:
    explicit Conv2dRun(const Conv2dProblem &p)
        : p_(p), m_(*p.multiplier),
          N(p.x.shape[0]), C(p.x.shape[1]), H(p.x.shape[2]), W(p.x.shape[3]),
          O(p.w.shape[0]), KH(p.w.shape[2]), KW(p.w.shape[3]),
          OH(p.out.shape[2]), OW(p.out.shape[3]), G(p.groups), Cg(C / G), Og(O / G),
          K(Cg * KH * KW), P(OH * OW),
          item_(static_cast<int64_t>(dtype_size(p.x.dtype))),
          w_item_(dtype_size(p.w.dtype)),
          pixel_step_(pointwise(p) ? pixel_chain(p.x, false) : 0),
          batch_step_(pointwise(p) ? pixel_chain(p.x, true) : 0),
          depthwise_(depthwise(p, m_)),
          // (a pointwise GEMM reads x in place: its row sums cost what the
          // channel sums would; depthwise rows add their own)
          fold_x_sums_(p.w_zero_point != 0 && pixel_step_ == 0 && !depthwise_),
          Wp(W + 2 * p.padding[1]), Hp(H + 2 * p.padding[0]),
          wide_(!depthwise_ && p.stride[0] == 1 && p.stride[1] == 1 && wide_pays(m_.plan(), OW, Wp)),
          row_len_(wide_ ? Wp : OW), Pr(OH * row_len_),
          plane_len_(Hp * Wp + (KW - 1) * p.dilation[1]),
          // every channel sum and receptive-field sum of codes fits int32
          sums32_(wide_ && K < (int64_t{1} << 31) / (item_ == 1 ? 256 : 65536)),
          padded_rows_(!wide_ && !depthwise_ && Cg * plane_len_ * item_ <= kPaddedRowBytes),
          out_dtype_(sum_dtype(p, m_, K, fold_x_sums_)),
          sum_bound_(p.stage != nullptr
                         ? accumulator_bound(m_, K, p.x_zero_point, p.w_zero_point) : 0) {}

    bool empty() const { return N == 0 || O == 0 || P == 0; }

    // The wide path multiplies Wp - OW dropped columns per output row to
    // save the per-row gather: worth it where products are cheap GEMM
    // lanes, not where each is a table lookup or a model call (random
    // table, 64->64 8x8: a quarter more products, 10-20 % more time;
    // 32->32 16x16: an eighth more, 10 % more time than gather_padded).
    static bool wide_pays(Plan plan, int64_t OW, int64_t Wp) {
        const int64_t parts = plan == Plan::Table || plan == Plan::Function ? 16 : 4;
        return OW * parts >= Wp * (parts - 1);
    }

    // Depthwise layers (one input and one output channel per group) of 8-bit
    // codes under an exact or rank-1 factorized plan (M(a, b) = u(a) v(b)):
    // a sum has KH*KW products, too few for a GEMM (one output channel in a
    // 16-row tile and 9 of its 64 inner bytes: MobileNet's 3x3 layers ran at
    // 0.17-0.26x of torch's float conv), so each output row adds its taps as
    // vectors over the image plane mapped through u (multiply_depthwise).
    // Arbitrary 8-bit tables take the same path with the table kernel's
    // lookups (depthwise_table). Each worker holds one padded plane (two
    // for DRUM with zw != 0) of int32: planes past kPaddedRowBytes keep the
    // GEMM path, whose gathers clamp instead of padding (padding 30000
    // around a 1x1 image would be 14 GB).
    static bool depthwise(const Conv2dProblem &p, const Multiplier &m) {
        const long double plane = static_cast<long double>(p.x.shape[2] + 2 * p.padding[0]) *
                                  static_cast<long double>(p.x.shape[3] + 2 * p.padding[1]);
        return p.groups > 1 && p.groups == p.x.shape[1] && p.groups == p.w.shape[0] && !pointwise(p) &&
               dtype_size(p.x.dtype) == 1 && dtype_size(p.w.dtype) == 1 &&
               (m.int16_factors().rank == 1 || depthwise_table(p, m)) && !needs_staging(m) &&
               plane * 4 <= static_cast<long double>(kPaddedRowBytes);
    }

    // A depthwise layer's taps looked up in an 8-bit table (products within
    // 16 bits): the plane's codes streamed through the table kernel with the
    // channel's weight codes stationary (where the GEMM path ran a one-row
    // table GEMM per group: 0.04-0.10x of torch's float conv on MobileNet's
    // 14x14 and 7x7 layers). The kernel takes up to 256 stationary codes a
    // call (all K taps, or a kernel row past 256) and its uint32 sums hold
    // 65536 products.
    static bool depthwise_table(const Conv2dProblem &p, const Multiplier &m) {
        return m.plan() == Plan::Table && m.bits() == 8 && !m.byte_planes(true).empty() &&
               selected_kernels().table_block != nullptr && p.w.shape[3] <= 256 &&
               p.w.shape[2] * p.w.shape[3] <= 65536;
    }
    // multiply_depthwise looks its products up (depthwise_table)
    bool table_taps() const { return m_.int16_factors().rank != 1; }

    // Pointwise layers (1x1 kernel, stride 1, no padding) need no im2col:
    // the GEMM reads x's pixels in place, as rows of a pixels x channels
    // matrix, where they lie at one step from each other: within an image,
    // or across the whole batch (NHWC, 1x1 images). Without an output stage
    // it writes its sums straight into out the same way where out's pixels
    // allow. (Through the gathers and the scatter, a batch of 1x1 images
    // cost a copy per code and a 1024->1024 layer 6-8x its matmul.)
    static bool pointwise(const Conv2dProblem &p) {
        // (no channels: an empty x may be NULL, and no pointer is formed into it)
        return p.w.shape[2] == 1 && p.w.shape[3] == 1 && p.stride[0] == 1 && p.stride[1] == 1 &&
               p.padding[0] == 0 && p.padding[1] == 0 && p.x.shape[1] > 0;
    }

    // The step in elements between consecutive pixels of t (N C H W) within
    // an image, or across the batch, or 0 where there is none: the axes of
    // size > 1, innermost first (x, y, then n), must each step over the
    // whole extent of the one before (a size-1 axis's stride says nothing).
    // Zero and negative steps take the general path.
    static int64_t pixel_chain(const TensorView &t, bool across_images) {
        int64_t step = 0, next = 0;
        bool reachable = true;  // next fits int64 (a valid view's stride * (size - 1) does)
        const int axes[3] = {3, 2, 0};
        for (int i = 0; i < (across_images ? 3 : 2); ++i) {
            const int a = axes[i];
            if (t.shape[a] <= 1) continue;
            if (step == 0) {
                if (t.strides[a] <= 0) return 0;
                step = t.strides[a];
            } else if (!reachable || t.strides[a] != next) {
                return 0;
            }
            reachable = !__builtin_mul_overflow(t.strides[a], t.shape[a], &next);
        }
        return step != 0 ? step : 1;
    }

    // The pixel blocks and the jobs; prepares everything jobs share.
    void prepare(int threads) {
        choose_mapping();
        if (depthwise_) size_depthwise();
        set_zero_code();
        size_blocks(threads);
        set_target();
        group_weights();  // after the blocks and target: whether any GEMM reads them
        set_tap_columns();
    }

    int64_t jobs() const { return (lanes_ ? ceil_div(G, kDepthwiseLanes) : G) * pixel_blocks_; }
    // Whether the jobs run in parallel, each on one thread, or one after
    // another with the threads inside each matmul (size_blocks decides).
    bool jobs_in_parallel() const { return jobs_in_parallel_; }

    struct Workspace {  // one per thread, made on it (parallel_for_each)
        // the call's large buffers come from the scratch cache: allocated
        // afresh, a batch-1 512->512 7x7 layer spent a third of its time in
        // page faults
        Scratch<char> col;     // K x block codes, k-major (a block row per tap)
        Scratch<int64_t> out;  // Og x block sums, channel-major (pixel-major: image_sums_)
        // per pixel of the block: its x cross term (pointwise mapped codes: their sum)
        std::vector<int64_t> pixel_term;
        std::vector<int32_t> pixel_term32;  // the same modulo 2^32, for int32 sums
        std::vector<int64_t> plane;       // channel sums of one image and group
        std::vector<int32_t> plane32;     // the same on the wide path where sums32_
        std::vector<int32_t> tap_sums32;  // wide path, sums32_: each pixel's KH*KW plane sums
        // n * G + g of the plane held (and on the wide path of the padded image)
        int64_t plane_key = -1;
        int64_t padded_key = -1;          // gather_padded: n * G + g of the padded image held
        Scratch<char> padded;             // the image and group, padded (wide path, gather_padded)
        PackCache weight_pack;            // the GEMM's packed weights, kept across blocks
        std::vector<int64_t> acc;         // output stage: one channel's final sums
        std::vector<char> stage_codes, stage_out;  // and their codes (and real values)
        std::vector<int32_t> zero_bias;   // stage_images without a bias
        std::vector<int64_t> tap_offsets;  // per tap: its row's offset in ws.padded
        std::vector<std::array<int64_t, 5>> spans;  // stage_rows_block: the block's for_spans
        // multiply_depthwise: image n's plane of channel g (key n * G + g)
        // through u, and its codes' values; the taps' v(w); a row's sums
        std::vector<int32_t> dw_u, dw_x, dw_v, dw_box;
        int64_t dw_box_end = 0;  // dw_box's valid length (kernel_row_sums)
        std::vector<uint8_t> dw_row;  // a row's u bytes (u_bytes_)
        std::vector<uint8_t> dw_codes, dw_w;  // tables: the plane's codes; the weight codes
        std::vector<uint8_t> dw_taps;         // tables: a call's tap rows, side by side
        std::vector<uint32_t> dw_sums;        // tables: a call's sums of M - offset
        int64_t dw_key = -1;
        std::vector<int32_t> dw_acc32;  // the sums of the output rows a block touches
        std::vector<int64_t> dw_acc64;
        // multiply_lanes: an image's planes of kDepthwiseLanes channels as
        // lanes (and their codes' values), the sums
        std::vector<int32_t> dw_lanes, dw_lane_acc;
        std::vector<int32_t> dw_lane_compact, dw_lane_out;  // an image's lanes unpadded; the sums by channel
        std::vector<uint8_t> dw_lane_codes;  // the channels' codes (through u) as L planes
    };

    void run_job(int64_t job, Workspace &ws, int inner_threads) const {
        if (lanes_) {
            ws.out.reserve(static_cast<size_t>(block_));
            multiply_lanes(job, ws);
            return;
        }
        if (!depthwise_) ws.col.reserve(static_cast<size_t>(block_ * K * item_));  // the gathered block
        ws.out.reserve(static_cast<size_t>(block_ * Og));
        ws.pixel_term32.resize(static_cast<size_t>(block_));
        if (sums32_) ws.tap_sums32.resize(static_cast<size_t>(block_));
        const int64_t g = job / pixel_blocks_;
        const int64_t r0 = job % pixel_blocks_ * block_, np = std::min(block_, N * Pr - r0);
        bool terms32_written = false;
        if (depthwise_) {
            multiply_depthwise(g, r0, np, ws);
        } else if (pixel_step_ != 0) {
            if (multiply_pointwise(g, r0, np, ws, inner_threads)) return;  // sums written into out
        } else {
            // a wide block inside one image: the GEMM reads its taps in place
            const bool in_place = wide_ && item_ == 1 && np <= Pr - r0 % Pr;
            if (wide_) {
                with_x_type([&](auto zero) { gather_wide<decltype(zero)>(g, r0, np, ws, !in_place); });
                terms32_written = sums32_;  // by wide_terms
            } else if (padded_rows_) {  // codes mapped in the padded image
                with_x_type([&](auto zero) { gather_padded<decltype(zero)>(g, r0, np, ws); });
            } else {
                if (item_ == 1)
                    gather<uint8_t>(g, r0, np, ws.col.data());
                else
                    gather<uint16_t>(g, r0, np, ws.col.data());
                if (mapped_)
                    for (int64_t k = 0; k < K; ++k)
                        map_codes(map_x_, reinterpret_cast<uint8_t *>(ws.col.data()) + k * block_, np);
            }
            if (!wide_ && fold_x_sums_) pixel_terms(g, r0, np, ws);
            multiply(g, r0, np, ws, inner_threads, in_place);
        }
        const bool narrow = terms32();
        if (narrow && !terms32_written) {
            for (int64_t t = 0; t < np; ++t)
                ws.pixel_term32[static_cast<size_t>(t)] = static_cast<int32_t>(
                    static_cast<uint32_t>(static_cast<uint64_t>(ws.pixel_term[static_cast<size_t>(t)])));
        }
        if (p_.stage != nullptr && staged_.empty()) {
            stage_block(g, r0, np, ws);
            return;
        }
        scatter(g, r0, np, ws.out.data(), fold_x_sums_ ? ws.pixel_term.data() : nullptr,
                narrow ? ws.pixel_term32.data() : nullptr);
    }

    // Failing-capable models computed into the staging copy: now the output.
    void write_staged() const {
        if (p_.stage != nullptr) {
            std::vector<char> codes(static_cast<size_t>(P) * 2);
            for (int64_t row = 0; row < N * O; ++row) {
                requantize_row(row % O, staged_.data() + row * P, true, P, codes.data());
                emit_codes(codes.data(), P, static_cast<char *>(p_.stage->out) + row * P * stage_item());
            }
            return;
        }
        for (int64_t e = 0; e < N * O * P; ++e) {
            const int64_t n = e / (O * P), oc = e / P % O, pixel = e % P;
            const int64_t offset = n * p_.out.strides[0] + oc * p_.out.strides[1] +
                                   pixel / OW * p_.out.strides[2] + pixel % OW * p_.out.strides[3];
            MatrixView one{"out", p_.out.dtype, offset_ptr(p_.out.data, offset, p_.out.dtype), 1, 1,
                           0, 0};
            store_value(one, 0, 0, staged_[static_cast<size_t>(e)]);
        }
    }
    bool staged() const { return !staged_.empty(); }

private:
    // Weights per group as K x Og (inner x cols) stored column-major (each
    // output channel's taps contiguous), copied once: B of every matmul (in
    // w's own storage type, which may differ from x's: uint8 and uint16).
    // The GEMMs flip conv2d's problem so that the weights become A, whose
    // rows they then pack contiguously instead of one strided code at a time.
    void group_weights() {
        const int64_t *st = p_.w.strides;
        const bool contiguous = st[3] == 1 && st[2] == KW && st[1] == KH * KW && st[0] == K;
        if (mapped_ && raw_pointwise_) {
            raw_only_ = true;  // every block on the original codes: no mapped copy to make
            for (int64_t b = 0; b < pixel_blocks_ && raw_only_; ++b)
                raw_only_ = pointwise_block(b * block_, std::min(block_, N * Pr - b * block_)).in_place;
        }
        if ((contiguous && !mapped_) || raw_only_) {
            // contiguous O,C/G,KH,KW is already that order: the GEMMs read it
            // in place (a 512->512 3x3 layer's copy was 2.4 MB per call)
            weight_codes_ = static_cast<const char *>(p_.w.data);
            return;
        }
        const size_t bytes = static_cast<size_t>(G * K * Og) * w_item_;
        weights_ = Scratch<char>(bytes);
        if (contiguous) {
            if (bytes != 0) std::memcpy(weights_.data(), p_.w.data, bytes);
        } else {
            copy_weights();
        }
        weight_codes_ = weights_.data();
        map_weights();
    }

    void copy_weights() {
        for (int64_t g = 0; g < G; ++g)
            for (int64_t o = 0; o < Og; ++o)
                for (int64_t c = 0; c < Cg; ++c)
                    for (int64_t i = 0; i < KH; ++i)
                        for (int64_t j = 0; j < KW; ++j) {
                            const int64_t src = (g * Og + o) * p_.w.strides[0] +
                                                c * p_.w.strides[1] + i * p_.w.strides[2] +
                                                j * p_.w.strides[3];
                            const int64_t dst = (g * Og + o) * K + (c * KH + i) * KW + j;
                            std::memcpy(weights_.data() + dst * w_item_,
                                        offset_ptr(p_.w.data, src, p_.w.dtype), w_item_);
                        }
    }

    void map_weights() {
        if (!mapped_) return;
        // the cross terms take the weights' own codes, summed before they are mapped
        // (a loop of int64 adds here was 39 % of a batch-1 512->512 DRUM layer)
        w_sums_.resize(static_cast<size_t>(O));
        for (int64_t o = 0; o < O; ++o)
            w_sums_[static_cast<size_t>(o)] = byte_sum(weights_.data() + o * K, K, m_.is_signed());
        map_codes(map_w_, reinterpret_cast<uint8_t *>(weights_.data()), O * K);
    }

    // A rank-1 factorization M(a, b) = u(a) v(b) whose factors are codes of
    // the operands' own byte type (DRUM, DSM): x and w go through u and v
    // once each, and the GEMMs multiply the mapped codes exactly, on the
    // exact 8-bit plan's kernels (byte widening or vpdpbusd). Otherwise
    // every GEMM maps each of the KH*KW copies of an input code that im2col
    // makes through a 16-bit table as it packs them (a third of a DRUM
    // 16->16 layer on AVX2). The cross terms keep the original codes.
    void choose_mapping() {
        if (depthwise_) return;  // multiply_depthwise maps through u itself
        if (m_.plan() != Plan::Factorized || item_ != 1 || w_item_ != 1) return;
        const Int16Factors &factors = m_.int16_factors();
        if (factors.rank != 1) return;
        const std::vector<int16_t> &u = factors.u, &v = factors.v;
        const int lo = m_.is_signed() ? -128 : 0, hi = m_.is_signed() ? 127 : 255;
        const uint32_t mask = m_.operand_mask();
        for (const auto *f : {&u, &v})
            for (int16_t value : *f)
                if (value < lo || value > hi) return;
        for (uint32_t raw = 0; raw < 256; ++raw) {
            map_x_[raw] = static_cast<uint8_t>(u[raw & mask]);
            map_w_[raw] = static_cast<uint8_t>(v[raw & mask]);
        }
        static const auto exact_u8 = Multiplier::exact(8, false);
        static const auto exact_s8 = Multiplier::exact(8, true);
        gemm_m_ = m_.is_signed() ? exact_s8.get() : exact_u8.get();
        mapped_ = true;
        // Pointwise blocks read in place take the multiplier's own byte GEMM
        // where it has one of rank 1: it maps the codes as it packs them, on
        // every thread, where mapping first copied each block on one.
        const U8Factors &as_is = m_.u8_factors(false), &flipped = m_.u8_factors(true);
        raw_pointwise_ = pixel_step_ != 0 && selected_kernels().u8_micro != nullptr &&
                         ((as_is.found && as_is.b_offset.size() == 1) ||
                          (flipped.found && flipped.b_offset.size() == 1));
    }

    // Whether every partial sum of multiply_depthwise fits int32 (vector
    // lanes of int32 products and sums): K times the largest |u v| and
    // |zw x|, plus the constant part.
    void size_depthwise() {
        // tap_rows' offsets (and the factors that do not depend on the
        // group): the K taps (v(w_t), per group), the KH kernel rows of
        // kernel_row_sums (-zw), the KW columns one sums (1)
        const int64_t d0 = p_.dilation[0], d1 = p_.dilation[1];
        tap_offsets_.assign(static_cast<size_t>(K + KH + KW), 0);
        tap_factors_.assign(static_cast<size_t>(K + KH + KW), 1);
        for (int64_t i = 0; i < KH; ++i) {
            for (int64_t j = 0; j < KW; ++j)
                tap_offsets_[static_cast<size_t>(i * KW + j)] = i * d0 * Wp + j * d1;
            tap_offsets_[static_cast<size_t>(K + i)] = i * d0 * Wp;
            tap_factors_[static_cast<size_t>(K + i)] = static_cast<int32_t>(-p_.w_zero_point);
        }
        for (int64_t j = 0; j < KW; ++j) tap_offsets_[static_cast<size_t>(K + KH + j)] = j * d1;
        const int64_t zx = std::abs(p_.x_zero_point), zw = std::abs(p_.w_zero_point);
        if (table_taps()) {  // and every partial sum: K (M - offset), K offset, ...
            const long double largest = static_cast<long double>(
                std::abs(m_.min_product()) + (m_.max_product() - m_.min_product()));
            const long double bound = K * (largest + 256 * zw + 256 * zx + static_cast<long double>(zx * zw));
            depthwise32_ = bound < static_cast<long double>(int64_t{1} << 31);
            return;
        }
        const Int16Factors &f = m_.int16_factors();
        int64_t u_max = 0, v_max = 0;
        for (int16_t x : f.u) u_max = std::max<int64_t>(u_max, std::abs(int64_t{x}));
        for (int16_t x : f.v) v_max = std::max<int64_t>(v_max, std::abs(int64_t{x}));
        const long double bound = static_cast<long double>(K) * (u_max * v_max + 256 * zw + 256 * zx + zx * zw);
        depthwise32_ = bound < static_cast<long double>(int64_t{1} << 31);
        // u's values as bytes (unsigned: 1, signed: -1) for map_plane's vector
        // lookup (map_x_, which choose_mapping leaves alone here)
        const auto [lo, hi] = std::minmax_element(f.u.begin(), f.u.end());
        u_bytes_ = *lo >= 0 && *hi <= 255 ? 1 : *lo >= -128 && *hi <= 127 ? -1 : 0;
        for (uint32_t raw = 0; raw < 256 && u_bytes_ != 0; ++raw)
            map_x_[raw] = static_cast<uint8_t>(f.u[raw & m_.operand_mask()]);
        // small planes take channels as lanes (multiply_lanes): in-process,
        // MobileNetV2's 7x7 to 28x28 layers ran at 0.3-0.8 of the per-plane
        // path's time; 56x56 planes (a job's lanes then fill L2) at 0.56-0.64
        // in batches of 8 but 1.06-1.27 alone, 112x112 at 1.05-3.3
        const int64_t lane_bytes = Hp * Wp * kDepthwiseLanes * 4 * (values_plane() ? 2 : 1);
        lanes_ = depthwise32_ && OH * OW <= kLanesMaxOutputs && lane_bytes <= kPaddedRowBytes;
        if (lanes_) set_lane_factors();
    }

    // Per block of kDepthwiseLanes channels (lane_block_ apart in
    // lane_factors_): v(w_t) per tap and lane (-zw folded in where u is the
    // value), where values_plane() -zw per tap and lane for the codes'
    // values, then each lane's constant part of the cross terms (within the
    // int32 bound); lanes past G are zero.
    void set_lane_factors() {
        constexpr int64_t L = kDepthwiseLanes;
        const Int16Factors &f = m_.int16_factors();
        const uint32_t mask = m_.operand_mask();
        const bool is_signed = m_.is_signed(), values = values_plane();
        const int64_t zx = p_.x_zero_point, zw = p_.w_zero_point;
        lane_block_ = K * L * (values ? 2 : 1) + L;
        // the taps' offsets, and where values_plane() the same taps in the
        // values' plane after u's: one pass adds both
        lane_offsets_.assign(tap_offsets_.begin(), tap_offsets_.begin() + K);
        for (int64_t t = 0; values && t < K; ++t)
            lane_offsets_.push_back(tap_offsets_[static_cast<size_t>(t)] + Hp * Wp);
        lane_factors_.assign(static_cast<size_t>(ceil_div(G, L) * lane_block_), 0);
        const int64_t *wst = p_.w.strides;
        for (int64_t g = 0; g < G; ++g) {
            int32_t *v = lane_factors_.data() + g / L * lane_block_;
            const int64_t l = g % L;
            const auto *w = static_cast<const uint8_t *>(p_.w.data) + g * wst[0];
            int64_t w_sum = 0;
            for (int64_t i = 0; i < KH; ++i)
                for (int64_t j = 0; j < KW; ++j) {
                    const uint8_t code = w[i * wst[2] + j * wst[3]];
                    v[(i * KW + j) * L + l] = f.v[code & mask] - static_cast<int32_t>(values ? 0 : zw);
                    w_sum += is_signed ? static_cast<int8_t>(code) : code;
                }
            for (int64_t t = 0; values && t < K; ++t) v[(K + t) * L + l] = static_cast<int32_t>(-zw);
            v[lane_block_ - L + l] = static_cast<int32_t>(K * zx * zw - zx * w_sum);
        }
    }
    static constexpr int64_t kLanesMaxOutputs = 1024;

    static void map_codes(const uint8_t *table, uint8_t *codes, int64_t n) {
        selected_kernels().u8_lut(n, codes, table, codes);
    }

    // The zero point in the input's storage type, for padded taps.
    void set_zero_code() {
        if (item_ == 1) {
            const auto z = static_cast<uint8_t>(p_.x_zero_point);
            std::memcpy(zero_code_, &z, 1);
        } else {
            const auto z = static_cast<uint16_t>(p_.x_zero_point);
            std::memcpy(zero_code_, &z, 2);
        }
    }

    // The streamed dimension is every output pixel of the batch, r = n * P +
    // pixel, in blocks of up to 4096 and about 256 KiB of gathered codes:
    // small images do not become many tiny matmuls, and the workspace does
    // not grow with N. With several threads there are at least two jobs per
    // thread, down to blocks of kMinBlock pixels, and a multiple of the
    // threads: jobs on one thread each (conv2d) beat one matmul at a time
    // on every thread by 1.5-3x for batches of 1-16 images. Blocks hold
    // whole images where that keeps those counts (a job pads and sums
    // every image it touches: cut images cost it twice); else they are a
    // multiple of 64 pixels (the table kernel's vector width) or of 32
    // (the widest GEMM panel), or of 8 when short.
    void size_blocks(int threads) {
        constexpr int64_t kMinBlock = 128;
        if (lanes_) {  // a job per image and kDepthwiseLanes channels, on every thread
            block_ = P, pixel_blocks_ = N;  // (even fewer jobs than threads: a job uses one)
            jobs_in_parallel_ = true;
            return;
        }
        const int64_t R = N * Pr;
        const int64_t largest = std::clamp<int64_t>(
            (int64_t{1} << 18) / std::max<int64_t>(K * item_, 1), 64, 4096) / 64 * 64;
        int64_t blocks = ceil_div(R, largest);
        if (threads > 1)
            blocks = std::max(blocks, std::min(ceil_div(2 * threads, G), R / kMinBlock));
        jobs_in_parallel_ = G * blocks >= 2 * threads;
        if (!jobs_in_parallel_) {  // matmuls one at a time on all threads: few and large
            block_ = std::min(R, largest);
            pixel_blocks_ = ceil_div(R, block_);
            return;
        }
        while (G * blocks % threads != 0) ++blocks;
        // Whole-image blocks: the fewest that give every thread the same
        // number of jobs, unless another split gives the busiest thread a
        // sixteenth fewer images (64 images of 8x8 on 2 threads: 9 blocks of
        // 7 and one of 1 left a thread 35 images to the other's 29; blocks of
        // 4 run the random table's layer in 0.83-0.91x the time). Smaller blocks
        // cost each job a little more, which a smaller gain does not repay
        // (32->32 16x16, exact: 33 -> 32 images measured 1.06-1.10x).
        int64_t first = 0, first_load = 0, best = 0, best_load = 0;
        for (int64_t count = blocks; count <= std::min(N, 2 * blocks); ++count) {
            const int64_t images = ceil_div(N, count);  // per block
            const int64_t jobs = G * ceil_div(N, images);
            if (images * Pr > largest || jobs < G * blocks) continue;
            const int64_t load = ceil_div(jobs, threads) * images;
            if (first == 0 && jobs % threads == 0) first = images, first_load = load;
            if (best == 0 || load < best_load) best = images, best_load = load;
        }
        if (first != 0) {
            const int64_t images = best_load * 16 <= first_load * 15 ? best : first;
            block_ = images * Pr;
            pixel_blocks_ = ceil_div(N, images);
            return;
        }
        // short blocks round to 8 pixels: to 32, 1100 pixels on 4 threads made 7 jobs, not 8
        const int64_t even = ceil_div(R, blocks);
        const int64_t quantum = even < 256 ? 8 : m_.plan() == Plan::Table ? 64 : 32;
        block_ = std::min(R, ceil_div(even, quantum) * quantum);
        pixel_blocks_ = ceil_div(R, block_);
    }

    // Where the GEMM's sums go: the output itself, or the staging copy (N O
    // P, int64) for failing-capable models.
    void set_target() {
        target_ = p_.out;
        if (needs_staging(m_)) {
            staged_.resize(static_cast<size_t>(N * O * P));
            target_.data = staged_.data();
            target_.dtype = APPROXMUL_INT64;
            const int64_t st[4] = {O * P, P, OW, 1};
            std::copy(st, st + 4, target_.strides);
        }
        image_sums_ = pixel_step_ != 0 && P == 1 && p_.stage != nullptr && staged_.empty();
        // out as the GEMMs' C: no stage or staging between
        if (pixel_step_ != 0 && p_.stage == nullptr && staged_.empty()) {
            out_pixel_step_ = pixel_chain(p_.out, false);
            out_batch_step_ = pixel_chain(p_.out, true);
            direct_ = out_pixel_step_ != 0;
        }
        pixel_offsets_.resize(static_cast<size_t>(P));
        for (int64_t px = 0; px < P; ++px)
            pixel_offsets_[static_cast<size_t>(px)] =
                px / OW * target_.strides[2] + px % OW * target_.strides[3];
        plane_contiguous_ = target_.strides[3] == 1 && target_.strides[2] == OW;
    }

    // Per kernel column j: the output columns [lo, hi) whose tap lies
    // inside the image (the rest read padding), and the input column of
    // output column 0. A tap's horizontal validity does not depend on the
    // output row, so a row segment needs no per-pixel test.
    void set_tap_columns() {
        tap_x0_.resize(static_cast<size_t>(KW));
        tap_lo_.resize(static_cast<size_t>(KW));
        tap_hi_.resize(static_cast<size_t>(KW));
        const int64_t s1 = p_.stride[1];
        for (int64_t j = 0; j < KW; ++j) {
            // output columns ox with 0 <= x0 + ox * s1 < W
            const int64_t x0 = j * p_.dilation[1] - p_.padding[1];
            const int64_t lo = std::min(OW, x0 >= 0 ? 0 : (-x0 + s1 - 1) / s1);
            const int64_t hi = std::max(lo, std::min(OW, x0 >= W ? 0 : (W - x0 + s1 - 1) / s1));
            tap_x0_[static_cast<size_t>(j)] = x0;
            tap_lo_[static_cast<size_t>(j)] = lo;
            tap_hi_[static_cast<size_t>(j)] = hi;
        }
    }

    // im2col of pixels r0 .. r0 + np: the block is cut into segments of one
    // output row (one division pair per segment, not per tap or pixel), and
    // each tap (c, i, j) of a segment is one copy between zero-point fills:
    // contiguous (memcpy) when the input row is read with stride 1.
    template <typename T>
    void gather(int64_t g, int64_t r0, int64_t np, char *col_bytes) const {
        T *col = reinterpret_cast<T *>(col_bytes);
        T zero;
        std::memcpy(&zero, zero_code_, sizeof(T));
        const int64_t taps = KH * KW;
        for (int64_t q = 0; q < np;) {
            const int64_t r = r0 + q, n = r / P, pixel = r % P;
            const int64_t oy = pixel / OW, ox0 = pixel % OW;
            const int64_t ox1 = std::min(OW, ox0 + np - q), run = ox1 - ox0;
            for (int64_t i = 0; i < KH; ++i) {
                const int64_t y = oy * p_.stride[0] - p_.padding[0] + i * p_.dilation[0];
                const bool row_inside = y >= 0 && y < H;
                for (int64_t j = 0; j < KW; ++j) {
                    const auto jj = static_cast<size_t>(j);
                    const int64_t lo = row_inside ? std::clamp(tap_lo_[jj], ox0, ox1) : ox1;
                    const int64_t hi = row_inside ? std::clamp(tap_hi_[jj], lo, ox1) : ox1;
                    for (int64_t c = 0; c < Cg; ++c) {
                        T *d = col + (c * taps + i * KW + j) * block_ + q - ox0;
                        fill_run(d + ox0, lo - ox0, zero);
                        fill_run(d + hi, ox1 - hi, zero);
                        // no tap inside the image: form no pointer into x
                        // (it may be empty, even NULL)
                        if (hi == lo) continue;
                        // offsets only for an element that exists: an empty
                        // x may have any strides (and products overflowing)
                        const T *src = static_cast<const T *>(p_.x.data) + n * p_.x.strides[0] +
                                       (g * Cg + c) * p_.x.strides[1] + y * p_.x.strides[2] +
                                       (tap_x0_[jj] + lo * p_.stride[1]) * p_.x.strides[3];
                        // the step only between two real elements: a size-1
                        // axis may have any stride, and stride * it overflow
                        copy_run(d + lo, src, hi - lo,
                                 hi - lo > 1 ? p_.stride[1] * p_.x.strides[3] : 1);
                    }
                }
            }
            q += run;
        }
    }

    // The per-row path from images padded once (pad_image, codes mapped
    // there too): each tap of an output row segment is one run of the
    // padded plane, with no clamping to the image and no edge fills (the
    // clamped gather above was a quarter of a 64->64 8x8 table layer,
    // whose 8-code rows the wide path would pad with a quarter more
    // products). Images padded up to kPaddedRowBytes.
    template <typename T>
    void gather_padded(int64_t g, int64_t r0, int64_t np, Workspace &ws) const {
        if (Cg == 0) return;  // no taps; and no padded image to form pointers into
        T *col = reinterpret_cast<T *>(ws.col.data());
        const int64_t s0 = p_.stride[0], s1 = p_.stride[1], d0 = p_.dilation[0], d1 = p_.dilation[1];
        for (int64_t q = 0; q < np;) {
            const int64_t r = r0 + q, n = r / P, pixel = r % P;
            const int64_t oy = pixel / OW, ox0 = pixel % OW, run = std::min(OW - ox0, np - q);
            if (ws.padded_key != n * G + g) {  // (plane_key: pixel_terms' sums)
                pad_image<T>(n, g, ws, false);
                ws.padded_key = n * G + g;
            }
            const T *origin = reinterpret_cast<const T *>(ws.padded.data()) + oy * s0 * Wp + ox0 * s1;
            T *d = col + q;
            // rows of small images (8-16 bytes) copied inline, not by a call
            // per tap (a call per 8 codes was a tenth of a 64->64 8x8 table layer)
            const auto bytes = static_cast<size_t>(run) * sizeof(T);
            const bool short_rows = s1 == 1 && bytes >= 8 && bytes <= 16;
            for (int64_t c = 0; c < Cg; ++c)
                for (int64_t i = 0; i < KH; ++i)
                    for (int64_t j = 0; j < KW; ++j, d += block_) {
                        const T *src = origin + c * plane_len_ + i * d0 * Wp + j * d1;
                        if (short_rows)
                            copy_short(d, src, bytes);
                        else
                            copy_run(d, src, run, s1);
                    }
            q += run;
        }
    }

    // Calls f(T{}) with x's element type (the wide path sums values).
    template <typename F>
    void with_x_type(const F &f) const {
        switch (p_.x.dtype) {
        case APPROXMUL_INT8: return f(int8_t{});
        case APPROXMUL_UINT8: return f(uint8_t{});
        case APPROXMUL_INT16: return f(int16_t{});
        default: return f(uint16_t{});
        }
    }

    // The wide path (stride 1, Wp = W + 2 * padding columns, at most a
    // third more than OW): pixels are indexed u = oy * Wp + ox over the
    // padded width, ox >= OW computing outputs that are dropped. Each image
    // and group is copied once into a padded plane (zero codes around it),
    // and then every tap's im2col row over a run of u is one contiguous
    // copy from that plane at offset i * d0 * Wp + j * d1: no edge cases,
    // one copy per tap and image, where the row path pays one per tap and
    // output row (8x8 images: 8-byte copies). The x cross term likewise sums
    // KH*KW entries of the padded plane's channel sums, with no edges.
    // The offset in ws.padded of tap k = (c, i, j) at wide pixel u = 0: its
    // im2col row over a run of u is that many codes on from there.
    int64_t tap_offset(int64_t k) const {
        const int64_t c = k / (KH * KW), i = k / KW % KH, j = k % KW;
        return c * plane_len_ + i * p_.dilation[0] * Wp + j * p_.dilation[1];
    }

    // The block's taps of pixels q.. q + run (wide pixels u0.. of the
    // padded image held) copied to ws.col.
    template <typename T>
    void copy_taps(int64_t q, int64_t u0, int64_t run, Workspace &ws) const {
        T *col = reinterpret_cast<T *>(ws.col.data());
        const T *padded = reinterpret_cast<const T *>(ws.padded.data());
        for (int64_t k = 0; k < K; ++k) copy_run(col + k * block_ + q, padded + tap_offset(k) + u0, run, 1);
    }

    template <typename T>
    void gather_wide(int64_t g, int64_t r0, int64_t np, Workspace &ws, bool copy) const {
        if (fold_x_sums_) ws.pixel_term.resize(static_cast<size_t>(block_));
        for (int64_t q = 0; q < np;) {
            const int64_t r = r0 + q, n = r / Pr, u0 = r % Pr;
            const int64_t run = std::min(Pr - u0, np - q);
            if (ws.plane_key != n * G + g) {
                pad_image<T>(n, g, ws);
                ws.plane_key = n * G + g;
            }
            if (copy) copy_taps<T>(q, u0, run, ws);
            if (fold_x_sums_) {
                if (sums32_)
                    wide_terms(ws.tap_sums32.data() + q, ws.plane32.data() + u0, q, run, ws);
                else
                    wide_terms(ws.pixel_term.data() + q, ws.plane.data() + u0, q, run, ws);
            }
            q += run;
        }
    }

    // The x cross terms of the block's pixels q.. q + run from the padded
    // plane's channel sums (from wide pixel u0): each pixel's KH*KW sums
    // added into a (Sum: int64, or int32 where sums32_ bounds them: twice the
    // lanes, and no widening), then K*zx*zw - zw * a into ws.pixel_term
    // (int64) and, for 32-bit sums, modulo 2^32 into ws.pixel_term32.
    template <typename Sum>
    void wide_terms(Sum *a, const Sum *sums, int64_t q, int64_t run, Workspace &ws) const {
        const int64_t zw = p_.w_zero_point, constant = K * p_.x_zero_point * zw;
        std::fill(a, a + run, Sum{0});
        for (int64_t i = 0; i < KH; ++i)
            for (int64_t j = 0; j < KW; ++j) {
                const Sum *from = sums + i * p_.dilation[0] * Wp + j * p_.dilation[1];
                for (int64_t t = 0; t < run; ++t) a[t] += from[t];
            }
        if constexpr (std::is_same<Sum, int64_t>::value) {
            for (int64_t t = 0; t < run; ++t) a[t] = constant - zw * a[t];
            return;
        }
        if (terms32()) {
            const auto c = static_cast<uint32_t>(static_cast<uint64_t>(constant));
            const auto z = static_cast<uint32_t>(static_cast<uint64_t>(zw));
            int32_t *d = ws.pixel_term32.data() + q;
            for (int64_t t = 0; t < run; ++t)
                d[t] = static_cast<int32_t>(c - z * static_cast<uint32_t>(a[t]));
        }
        if (terms64()) {
            int64_t *d = ws.pixel_term.data() + q;
            for (int64_t t = 0; t < run; ++t) d[t] = constant - zw * static_cast<int64_t>(a[t]);
        }
    }

    // Which forms of the x cross term the GEMM's sums take: modulo 2^32 for
    // int32 sums; int64 for int64 sums, or an output stage of int64 accumulators.
    bool terms32() const { return fold_x_sums_ && out_dtype_ == APPROXMUL_INT32; }
    bool terms64() const {
        return fold_x_sums_ && (out_dtype_ != APPROXMUL_INT32 ||
                                (p_.stage != nullptr && p_.out.dtype == APPROXMUL_INT64));
    }

    // Image n, group g into ws.padded: Cg planes of plane_len_ codes, the
    // image at (padding0, padding1) of an Hp x Wp grid of zero codes (the
    // tail beyond the grid is read only for dropped columns); and, when the
    // x cross term is folded, their channel sums into ws.plane.
    template <typename T>
    void pad_image(int64_t n, int64_t g, Workspace &ws, bool sums = true) const {
        ws.padded.reserve(static_cast<size_t>(Cg * plane_len_) * sizeof(T));
        T *padded = reinterpret_cast<T *>(ws.padded.data());
        T zero;
        std::memcpy(&zero, zero_code_, sizeof(T));
        fill_run(padded, Cg * plane_len_, zero);
        const int64_t w = W, h = H, pad0 = p_.padding[0], pad1 = p_.padding[1], wp = Wp;
        if (w > 0 && h > 0)  // an empty x may be NULL: form no pointer into it
            for (int64_t c = 0; c < Cg; ++c)
                for (int64_t y = 0; y < h; ++y)
                    copy_run(padded + c * plane_len_ + (y + pad0) * wp + pad1,
                             static_cast<const T *>(p_.x.data) + n * p_.x.strides[0] +
                                 (g * Cg + c) * p_.x.strides[1] + y * p_.x.strides[2],
                             w, p_.x.strides[3]);
        auto channel_sums = [&](auto &plane) {
            plane.resize(static_cast<size_t>(plane_len_));
            auto *sums = plane.data();
            const int64_t len = plane_len_;
            std::fill(sums, sums + len, 0);
            for (int64_t c = 0; c < Cg; ++c) {
                const T *from = padded + c * len;
                for (int64_t k = 0; k < len; ++k) sums[k] += from[k];
            }
        };
        if (sums && fold_x_sums_ && sums32_)
            channel_sums(ws.plane32);
        else if (sums && fold_x_sums_)
            channel_sums(ws.plane);
        // after the sums, which take the original codes: each code once per image
        if (mapped_)
            map_codes(map_x_, reinterpret_cast<uint8_t *>(ws.padded.data()), Cg * plane_len_);
    }

    // The x-side cross term of each pixel of the block, K*zx*zw - zw * (sum of
    // its receptive field, padded taps counting zx), from per-image channel
    // sums: Cg adds per input pixel plus KH*KW per output pixel, where the
    // GEMM's own row sums over the gathered block cost K per output pixel
    // (a sixth of a 16->16 3x3 conv).
    void pixel_terms(int64_t g, int64_t r0, int64_t np, Workspace &ws) const {
        ws.pixel_term.resize(static_cast<size_t>(block_));
        ws.plane.resize(static_cast<size_t>(H * W));
        const int64_t zx = p_.x_zero_point, zw = p_.w_zero_point, pad_sum = Cg * zx;
        const int64_t kw = KW, width = W, s1 = p_.stride[1], constant = K * zx * zw;
        int64_t *acc = ws.pixel_term.data();
        const int64_t *plane = ws.plane.data();
        for (int64_t q = 0; q < np;) {
            const int64_t r = r0 + q, n = r / P, pixel = r % P;
            const int64_t oy = pixel / OW, ox0 = pixel % OW;
            const int64_t ox1 = std::min(OW, ox0 + np - q), run = ox1 - ox0;
            if (ws.plane_key != n * G + g) {
                channel_sums(n, g, ws.plane.data());
                ws.plane_key = n * G + g;
            }
            int64_t *a = acc + q - ox0;  // a[ox], ox0 <= ox < ox1
            std::fill(a + ox0, a + ox1, 0);
            for (int64_t i = 0; i < KH; ++i) {
                const int64_t y = oy * p_.stride[0] - p_.padding[0] + i * p_.dilation[0];
                if (y < 0 || y >= H) {
                    for (int64_t ox = ox0; ox < ox1; ++ox) a[ox] += kw * pad_sum;
                    continue;
                }
                for (int64_t j = 0; j < KW; ++j) {
                    const auto jj = static_cast<size_t>(j);
                    const int64_t lo = std::clamp(tap_lo_[jj], ox0, ox1);
                    const int64_t hi = std::clamp(tap_hi_[jj], lo, ox1);
                    for (int64_t ox = ox0; ox < lo; ++ox) a[ox] += pad_sum;
                    for (int64_t ox = hi; ox < ox1; ++ox) a[ox] += pad_sum;
                    if (hi == lo) continue;  // an empty plane may be NULL: no pointer
                    const int64_t *row = plane + y * width + tap_x0_[jj];
                    for (int64_t ox = lo; ox < hi; ++ox) a[ox] += row[ox * s1];
                }
            }
            for (int64_t ox = ox0; ox < ox1; ++ox) a[ox] = constant - zw * a[ox];
            q += run;
        }
    }

    // plane[y * W + x] = sum over the group's channels of x[n, c, y, x]
    void channel_sums(int64_t n, int64_t g, int64_t *plane) const {
        // locals: the int64 stores could alias members, which blocks vectorising
        const int64_t w = W, h = H, cg = Cg, sx = p_.x.strides[3];
        const int64_t *strides = p_.x.strides;
        std::fill(plane, plane + h * w, 0);
        auto add = [&](const auto *data) {
            for (int64_t c = 0; c < cg; ++c)
                for (int64_t y = 0; y < h; ++y) {
                    const auto *row = data + n * strides[0] + (g * cg + c) * strides[1] +
                                      y * strides[2];
                    int64_t *dst = plane + y * w;
                    if (sx == 1)
                        for (int64_t x = 0; x < w; ++x) dst[x] += row[x];
                    else
                        for (int64_t x = 0; x < w; ++x) dst[x] += row[x * sx];
                }
        };
        if (Cg == 0 || H == 0 || W == 0) return;  // an empty x may be NULL
        switch (p_.x.dtype) {
        case APPROXMUL_INT8: add(static_cast<const int8_t *>(p_.x.data)); break;
        case APPROXMUL_UINT8: add(static_cast<const uint8_t *>(p_.x.data)); break;
        case APPROXMUL_INT16: add(static_cast<const int16_t *>(p_.x.data)); break;
        default: add(static_cast<const uint16_t *>(p_.x.data)); break;
        }
    }

    // pixels x taps (column-major view of the k-major buffer) times the
    // group's taps x channels, into channels x pixels
    // in_place: the block lies in the padded image ws holds (gather_wide
    // copied no taps), where the GEMM takes its taps from if it can; else
    // they are copied now.
    void multiply(int64_t g, int64_t r0, int64_t np, Workspace &ws, int inner_threads,
                  bool in_place) const {
        MatmulProblem mp = block_problem(g, np, ws, inner_threads);
        if (in_place) {
            const int64_t u0 = r0 % Pr;
            ws.tap_offsets.resize(static_cast<size_t>(K));
            for (int64_t k = 0; k < K; ++k) ws.tap_offsets[static_cast<size_t>(k)] = tap_offset(k) + u0;
            MatmulProblem direct = mp;
            direct.a.data = ws.padded.data();
            direct.a_col_offsets = ws.tap_offsets.data();
            if (matmul_in_place(direct)) return;
            copy_taps<uint8_t>(0, u0, np, ws);  // bytes: in_place holds only for them
        }
        matmul(mp);
    }

    // The GEMM of group g over np pixels of the k-major block in ws.col,
    // into ws.out.
    MatmulProblem block_problem(int64_t g, int64_t np, Workspace &ws, int inner_threads) const {
        MatmulProblem mp{gemm_m_, np, Og, K,
                         MatrixView{"x", p_.x.dtype, ws.col.data(), np, K, 1, block_},
                         MatrixView{"w", p_.w.dtype,
                                    weight_codes_ + static_cast<size_t>(g * K * Og) * w_item_, K,
                                    Og, 1, K},
                         MatrixView{"out", out_dtype_, ws.out.data(), np, Og, 1, block_},
                         p_.x_zero_point, fold_x_sums_ ? 0 : p_.w_zero_point, inner_threads,
                         &ws.weight_pack};
        // the cross terms of the original codes: the weights' sums here, x's
        // folded (fold_x_sums_), zero (w_zero 0) or handed over (pointwise)
        if (mapped_ && !raw_only_) {
            mp.b_col_sums = w_sums_.data() + g * Og;
            if (!fold_x_sums_ && p_.w_zero_point != 0 && pixel_step_ == 0)
                fail(APPROXMUL_ERR_INTERNAL, "conv2d: mapped codes need the folded x sums");
        }
        return mp;
    }

    // A pointwise block as one GEMM, which adds every cross term
    // (fold_x_sums_ is off). It reads x in place where the block lies at one
    // step in x and x's orientation is that of the sums' destination (rows
    // of channels for rows of channels, channel planes for channel planes:
    // crossed, the GEMM stores or packs one element per cache line, 2.5-4x
    // slower); else the block is copied into ws.col in the destination's
    // orientation (one copy per code: a 1x1 kernel has one tap), mapped
    // codes through their map, with their original codes' sums for the
    // GEMM. NCHW blocks of several images are copied too: a GEMM per image
    // repacked the weights for each. Returns whether the sums went straight
    // into out (direct_, where out's pixels lie at one step for the block);
    // else they are in ws.out, channel-major, or pixel-major for image_sums_.
    struct PointwiseBlock {
        int64_t step, out_step;  // between the block's pixels in x and out (0: none)
        bool direct;             // the GEMM writes out: a unit step on one side of C
        bool rows;               // C's rows are pixels' channels
        bool in_place;           // the GEMM reads x
    };
    PointwiseBlock pointwise_block(int64_t r0, int64_t np) const {
        const bool one_image = r0 / P == (r0 + np - 1) / P;
        PointwiseBlock b{};
        b.step = one_image ? pixel_step_ : batch_step_;  // 0: several runs
        b.out_step = !direct_ ? 0 : one_image ? out_pixel_step_ : out_batch_step_;
        b.direct = b.step != 0 && b.out_step != 0 && (p_.out.strides[1] == 1 || b.out_step == 1);
        b.rows = b.direct ? b.out_step != 1 : image_sums_;
        b.in_place = (!mapped_ || raw_pointwise_) && b.step != 0 &&
                     (b.rows ? p_.x.strides[1] == 1 || K == 1 : b.step == 1 || np == 1);
        return b;
    }

    bool multiply_pointwise(int64_t g, int64_t r0, int64_t np, Workspace &ws, int inner_threads) const {
        MatmulProblem mp = block_problem(g, np, ws, inner_threads);
        const int64_t *st = p_.x.strides, *os = p_.out.strides;
        const int64_t n0 = r0 / P, pixel0 = r0 % P;
        const auto [step, out_step, direct, rows, in_place] = pointwise_block(r0, np);
        if (direct)
            mp.c = MatrixView{"out", p_.out.dtype,
                              offset_ptr(p_.out.data, n0 * os[0] + g * Og * os[1] + pixel0 * out_step,
                                         p_.out.dtype),
                              np, Og, out_step, os[1]};
        else if (image_sums_)
            mp.c = MatrixView{"out", out_dtype_, mp.c.data, np, Og, Og, 1};
        if (in_place) {
            mp.a = MatrixView{"x", p_.x.dtype,
                              offset_ptr(p_.x.data, n0 * st[0] + g * Cg * st[1] + pixel0 * step, p_.x.dtype),
                              np, K, step, st[1]};
            if (mapped_) {  // the original codes, the multiplier's own GEMM
                const int64_t *ws_ = p_.w.strides;
                mp.multiplier = &m_;
                mp.b = MatrixView{"w", p_.w.dtype, offset_ptr(p_.w.data, g * Og * ws_[0], p_.w.dtype), K,
                                  Og, ws_[1], ws_[0]};
                mp.a_row_sums = mp.b_col_sums = nullptr;
                mp.b_pack_cache = nullptr;
            }
            matmul(mp);
            return direct;
        }
        const bool row_sums = mapped_ && p_.w_zero_point != 0;
        if (row_sums) {
            ws.pixel_term.assign(static_cast<size_t>(np), 0);
            mp.a_row_sums = ws.pixel_term.data();
        }
        if (rows) mp.a.row_stride = K, mp.a.col_stride = 1;
        const auto *x = static_cast<const char *>(p_.x.data);
        char *col = ws.col.data();
        // count codes from src (step elements apart) to dst, through the map if mapped
        auto copy = [&](const char *src, int64_t from_step, int64_t count, char *dst) {
            if (mapped_)
                map_into(reinterpret_cast<const uint8_t *>(src), from_step, count, reinterpret_cast<uint8_t *>(dst));
            else if (item_ == 1)
                copy_run(reinterpret_cast<uint8_t *>(dst), reinterpret_cast<const uint8_t *>(src), count, from_step);
            else
                copy_run(reinterpret_cast<uint16_t *>(dst), reinterpret_cast<const uint16_t *>(src), count, from_step);
        };
        for (int64_t q = 0; q < np;) {  // runs within an image, or the whole block where the batch chains
            const int64_t r = r0 + q, n = r / P, pixel = r % P;
            const int64_t run = batch_step_ != 0 ? np - q : std::min(P - pixel, np - q);
            const int64_t run_step = batch_step_ != 0 ? batch_step_ : pixel_step_;
            const char *src = x + (n * st[0] + g * Cg * st[1] + pixel * run_step) * item_;
            if (rows) {
                for (int64_t t = 0; t < run; ++t) {
                    copy(src + t * run_step * item_, st[1], Cg, col + (q + t) * K * item_);
                    if (row_sums)
                        add_codes(reinterpret_cast<const uint8_t *>(src) + t * run_step, st[1], Cg,
                                  ws.pixel_term.data() + q + t, 0);
                }
            } else {
                for (int64_t c = 0; c < Cg; ++c) {
                    copy(src + c * st[1] * item_, run_step, run, col + (c * block_ + q) * item_);
                    if (row_sums)
                        add_codes(reinterpret_cast<const uint8_t *>(src) + c * st[1], run_step, run,
                                  ws.pixel_term.data() + q, 1);
                }
            }
            q += run;
        }
        matmul(mp);
        return direct;
    }

    // Image n's planes of channels g0 .. g0 + lanes, channel g0 + l in lane
    // l of ws.dw_lanes (Hp x Wp positions of kDepthwiseLanes int32): through
    // u, padded with u(zx); where values_plane(), their codes' values after
    // them, padded with zx. Lanes from `lanes` on are left as they are:
    // their factors are zero and no output reads them.
    void map_lanes(int64_t n, int64_t g0, int64_t lanes, Workspace &ws) const {
        constexpr int64_t L = kDepthwiseLanes;
        const Int16Factors &f = m_.int16_factors();
        const uint32_t mask = m_.operand_mask();
        const bool is_signed = m_.is_signed(), values = values_plane();
        const bool exact = m_.plan() == Plan::ExactGemm;
        const int64_t zx = p_.x_zero_point, positions = Hp * Wp, HW = H * W;
        ws.dw_lanes.resize(static_cast<size_t>(positions * L * (values ? 2 : 1)));
        int32_t *u = ws.dw_lanes.data(), *xv = u + positions * L;
        // the padding only (a 7x7 plane's 81 positions were a fifth of its time)
        const int64_t p0 = p_.padding[0], p1 = p_.padding[1];
        auto pad = [&](int32_t *plane, int32_t fill) {
            if (HW == 0) {
                std::fill(plane, plane + positions * L, fill);
                return;
            }
            std::fill(plane, plane + (p0 * Wp + p1) * L, fill);
            for (int64_t y = 0; y + 1 < H; ++y)
                std::fill(plane + ((p0 + y) * Wp + p1 + W) * L, plane + ((p0 + y + 1) * Wp + p1) * L, fill);
            std::fill(plane + ((p0 + H - 1) * Wp + p1 + W) * L, plane + positions * L, fill);
        };
        pad(u, f.u[static_cast<uint8_t>(zx) & mask]);
        if (values) pad(xv, static_cast<int32_t>(zx));
        if (HW == 0) return;  // all padding (and an empty x may be NULL)
        const int64_t *xs = p_.x.strides;
        const auto *x = static_cast<const uint8_t *>(p_.x.data) + n * xs[0] + g0 * xs[1];
        if (xs[3] == 1 && xs[2] == W && (exact || u_bytes_ != 0)) {
            // each plane contiguous, u's values bytes: L planes of bytes
            // (through u's byte map, or padded to L planes) transposed
            const KernelTable &kt = selected_kernels();
            const bool copy = !exact || lanes < L;
            auto into = [&](const uint8_t *planes, int64_t step, bool signed_bytes, int32_t *to) {
                ws.dw_lane_compact.resize(static_cast<size_t>(HW * L));
                kt.lanes_from_planes(HW, planes, step, signed_bytes ? 1 : 0, ws.dw_lane_compact.data());
                for (int64_t y = 0; y < H; ++y)
                    std::memcpy(to + ((y + p0) * Wp + p1) * L,
                                ws.dw_lane_compact.data() + y * W * L,
                                static_cast<size_t>(W * L) * sizeof(int32_t));
            };
            // the channels' planes into L planes of ws.dw_lane_codes, through
            // u's byte map or as they are, zeros past `lanes`
            auto copy_planes = [&](bool through_map) {
                ws.dw_lane_codes.resize(static_cast<size_t>(HW * L));
                for (int64_t l = 0; l < L; ++l) {
                    uint8_t *to = ws.dw_lane_codes.data() + l * HW;
                    if (l >= lanes)
                        std::fill(to, to + HW, uint8_t{0});
                    else if (through_map)
                        kt.u8_lut(HW, x + l * xs[1], map_x_, to);
                    else
                        std::memcpy(to, x + l * xs[1], static_cast<size_t>(HW));
                }
            };
            if (copy) copy_planes(!exact);
            into(copy ? ws.dw_lane_codes.data() : x, copy ? HW : xs[1],
                 exact ? is_signed : u_bytes_ < 0, u);
            if (values) {  // the raw codes' values (copied again: the map changed them)
                copy_planes(false);
                into(ws.dw_lane_codes.data(), HW, is_signed, xv);
            }
            return;
        }
        for (int64_t y = 0; y < H; ++y)
            for (int64_t c = 0; c < W; ++c) {
                const int64_t at = ((y + p0) * Wp + c + p1) * L;
                const uint8_t *src = x + y * xs[2] + c * xs[3];
                for (int64_t l = 0; l < lanes; ++l) {
                    const uint8_t code = src[l * xs[1]];
                    u[at + l] = f.u[code & mask];
                    if (values) xv[at + l] = is_signed ? static_cast<int8_t>(code) : code;
                }
            }
    }

    // A depthwise job on small planes (lanes_): image n's planes of
    // kDepthwiseLanes channels at once, each channel a vector lane, every
    // output's taps in one pass (tap_lanes32); then each channel's sums
    // through the stage or the scatter as multiply_depthwise's would go.
    // (A 7x7 plane cost multiply_depthwise ~850 cycles of padding, calls
    // and copies for its 441 products.)
    void multiply_lanes(int64_t job, Workspace &ws) const {
        constexpr int64_t L = kDepthwiseLanes;
        const int64_t g0 = job / N * L, n = job % N, lanes = std::min(L, G - g0);
        map_lanes(n, g0, lanes, ws);
        const bool values = values_plane();
        const int32_t *v = lane_factors_.data() + job / N * lane_block_;
        const int32_t *constants = v + K * L * (values ? 2 : 1);
        const KernelTable &kt = selected_kernels();
        ws.dw_lane_acc.resize(static_cast<size_t>(P * L));
        int32_t *acc = ws.dw_lane_acc.data();
        const int64_t row_step = p_.stride[0] * Wp, s1 = p_.stride[1];
        kt.tap_lanes32(OH, OW, row_step, s1, ws.dw_lanes.data(), static_cast<int64_t>(lane_offsets_.size()),
                       lane_offsets_.data(), v, acc);
        // int32 sums straight into an int32 out whose planes are contiguous
        const TensorView &t = target_;
        if (lanes == L && p_.stage == nullptr && t.dtype == APPROXMUL_INT32 &&
            t.strides[3] == 1 && t.strides[2] == OW) {
            kt.lanes_to_rows(P, acc, constants,
                             static_cast<int32_t *>(const_cast<void *>(t.data)) + n * t.strides[0] +
                                 g0 * t.strides[1],
                             t.strides[1]);
            return;
        }
        ws.dw_lane_out.resize(static_cast<size_t>(P * L));
        kt.lanes_to_rows(P, acc, constants, ws.dw_lane_out.data(), P);
        if (p_.stage != nullptr && p_.out.dtype == APPROXMUL_INT32 && out_dtype_ == APPROXMUL_INT32) {
            // each channel's row straight through the stage (stage_rows_block's
            // spans, copy and calls cost a 7x7 plane a third of its time)
            const int64_t item = stage_item();
            for (int64_t l = 0; l < lanes; ++l) {
                const int64_t oc = g0 + l;
                stage_rows(oc, ws.dw_lane_out.data() + l * P, nullptr, 1, P, P,
                           static_cast<char *>(p_.stage->out) + (n * O + oc) * P * item, P);
            }
            return;
        }
        for (int64_t l = 0; l < lanes; ++l) {
            const int32_t *sums = ws.dw_lane_out.data() + l * P;
            if (out_dtype_ == APPROXMUL_INT32)
                std::memcpy(ws.out.data(), sums, static_cast<size_t>(P) * sizeof(int32_t));
            else
                std::copy(sums, sums + P, ws.out.data());
            if (p_.stage != nullptr && staged_.empty())
                stage_block(g0 + l, n * P, P, ws);
            else
                scatter(g0 + l, n * P, P, ws.out.data(), nullptr, nullptr);
        }
    }

    // Group g's sums over the block's pixels into ws.out as the GEMM would
    // write them (fold_x_sums_ is off: every cross term included):
    //   sum_t M(x_t, w_t) - zw sum_t x_t - zx sum_t w_t + K zx zw,
    // padded taps reading x = zx. Rank-1 plans, M = u(x) v(w): image n's
    // plane of channel g is mapped through u once into a plane padded with
    // u(zx) (and, for zw != 0, its codes' values padded with zx, unless u is
    // the value itself: exact plans take v(w_t) - zw instead), so every tap
    // is a plain row of it. The output rows the block touches start from
    // the constant part and add, per tap, v(w_t) times the plane's row (-zw
    // times the codes' row): with stride 1 all rows in one call over the
    // padded width (the dropped columns computed and skipped), else a call
    // per output row. Tables (depthwise_table): the plane's codes looked up
    // with the K weight codes stationary (the K tap rows side by side; a
    // call per kernel row past 256 taps), at stride 1 in x (a strided
    // layer's rows keep every s1-th sum).
    void multiply_depthwise(int64_t g, int64_t r0, int64_t np, Workspace &ws) const {
        const bool table = table_taps();
        const Int16Factors &f = m_.int16_factors();
        const uint32_t mask = m_.operand_mask();
        const bool is_signed = m_.is_signed();
        const int64_t zx = p_.x_zero_point, zw = p_.w_zero_point;
        const int64_t *wst = p_.w.strides;
        const auto *w = static_cast<const uint8_t *>(p_.w.data) + g * wst[0];
        const int64_t s0 = p_.stride[0], s1 = p_.stride[1], d0 = p_.dilation[0], d1 = p_.dilation[1];
        ws.dw_v.resize(static_cast<size_t>(K));
        ws.dw_w.resize(static_cast<size_t>(K));
        int64_t w_sum = 0;
        for (int64_t i = 0; i < KH; ++i)
            for (int64_t j = 0; j < KW; ++j) {
                const uint8_t code = w[i * wst[2] + j * wst[3]];
                ws.dw_w[static_cast<size_t>(i * KW + j)] = code;
                if (!table)
                    ws.dw_v[static_cast<size_t>(i * KW + j)] =
                        f.v[code & mask] - static_cast<int32_t>(values_plane() ? 0 : zw);
                w_sum += is_signed ? static_cast<int8_t>(code) : code;
            }
        // the table kernel's sums are of M - offset
        const int64_t constant = K * zx * zw - zx * w_sum + (table ? K * m_.byte_plane_offset() : 0);
        const KernelTable &kt = selected_kernels();
        const bool one_call = s0 == 1 && s1 == 1;
        const int64_t width = one_call ? Wp : OW;  // of a row of sums
        // a table row's lookups, at stride 1 in x, in whole 64-code vectors
        const int64_t looked_up = ceil_div((OW - 1) * s1 + 1, kTableSlack) * kTableSlack;
        // n codes of the plane from `at` on through the table into
        // ws.dw_sums (uint32, M - offset), the weights stationary: all K
        // taps in one call per table_width codes, their rows copied side by
        // side (a call per kernel row spent as long widening its 16-bit
        // sums as looking up a 56x56 plane's 3 taps), or a call per kernel
        // row (KW taps d1 apart) past 256 taps
        auto look_up = [&](int64_t n, int64_t at) {
            ws.dw_sums.assign(static_cast<size_t>(n), 0u);
            const uint8_t *planes = m_.byte_planes(true).data();
            const uint16_t *wide = m_.wide_planes(true).data();
            const int64_t step = kt.table_width;
            if (K <= 256) ws.dw_taps.resize(static_cast<size_t>(K * step));
            for (int64_t j0 = 0; j0 < n; j0 += step) {
                const int64_t piece = std::min(step, n - j0);
                const uint8_t *from = ws.dw_codes.data() + at + j0;
                if (K <= 256) {
                    for (int64_t i = 0; i < KH; ++i)
                        for (int64_t j = 0; j < KW; ++j)
                            std::memcpy(ws.dw_taps.data() + (i * KW + j) * step,
                                        from + i * d0 * Wp + j * d1, static_cast<size_t>(piece));
                    kt.table_block(K, ws.dw_w.data(), ws.dw_taps.data(), step, piece, planes, wide,
                                   ws.dw_sums.data() + j0);
                } else {
                    for (int64_t i = 0; i < KH; ++i)
                        kt.table_block(KW, ws.dw_w.data() + i * KW, from + i * d0 * Wp, d1, piece,
                                       planes, wide, ws.dw_sums.data() + j0);
                }
            }
        };
        auto rows = [&](auto *acc_buffer, auto tap, auto &acc_store) {
            using Acc = std::remove_pointer_t<decltype(acc_buffer)>;
            for (int64_t q = 0; q < np;) {  // the block's part of one image at a time
                const int64_t r = r0 + q, n = r / P, pixel = r % P;
                const int64_t count = std::min(P - pixel, np - q);
                map_plane(n, g, ws);
                const int64_t y0 = pixel / OW, y1 = (pixel + count - 1) / OW + 1;
                // one call's length rounded up to whole vectors (the planes
                // keep the slack): its scalar tail was most of a 7x7 plane's time
                const int64_t quantum = table ? kTableSlack : kTapSlack;
                const int64_t n_out = one_call ? ceil_div((y1 - y0) * Wp, quantum) * quantum : OW;
                acc_store.resize(static_cast<size_t>(std::max((y1 - y0) * width, n_out)));
                Acc *acc = acc_store.data();
                if (table) {  // every element written: n_out, or OW per row
                    for (int64_t y = y0; y < (one_call ? y0 + 1 : y1); ++y) {
                        look_up(one_call ? n_out : looked_up, y * s0 * Wp);
                        Acc *dst = acc + (y - y0) * width;
                        const uint32_t *sums = ws.dw_sums.data();
                        if (one_call)  // s1 == 1: the loop the compiler vectorizes
                            for (int64_t o = 0; o < n_out; ++o) dst[o] = static_cast<Acc>(constant + sums[o]);
                        else
                            for (int64_t o = 0; o < OW; ++o)
                                dst[o] = static_cast<Acc>(constant + sums[o * s1]);
                    }
                } else {
                    std::fill(acc, acc + acc_store.size(), static_cast<Acc>(constant));
                }
                if (values_plane())  // as far as the last kernel row's tap reads
                    kernel_row_sums(ws, one_call ? (y0 + (KH - 1) * d0) * Wp + n_out
                                                 : ((y1 - 1) * s0 + (KH - 1) * d0) * Wp +
                                                       (OW - 1) * s1 + 1);
                for (int64_t y = y0; y < (one_call ? y0 + 1 : y1); ++y) {
                    const int64_t at = y * s0 * Wp;
                    Acc *dst = acc + (y - y0) * width;
                    if (!table)  // every tap, v(w_t) times the plane through u
                        tap(n_out, ws.dw_u.data() + at, s1, K, tap_offsets_.data(), ws.dw_v.data(),
                            dst);
                    if (values_plane())  // each kernel row's codes at once, times -zw
                        tap(n_out, ws.dw_box.data() + at, s1, KH, tap_offsets_.data() + K,
                            tap_factors_.data() + K, dst);
                }
                for (int64_t y = y0, t = q; y < y1; ++y) {  // the block's columns of each row
                    const int64_t a = y == y0 ? pixel % OW : 0;
                    const int64_t b = y == y1 - 1 ? (pixel + count - 1) % OW + 1 : OW;
                    const Acc *from = acc + (y - y0) * width;
                    if (out_dtype_ == APPROXMUL_INT32) {
                        int32_t *to = reinterpret_cast<int32_t *>(ws.out.data()) + t - a;
                        for (int64_t o = a; o < b; ++o) to[o] = static_cast<int32_t>(from[o]);
                    } else {
                        int64_t *to = ws.out.data() + t - a;
                        for (int64_t o = a; o < b; ++o) to[o] = static_cast<int64_t>(from[o]);
                    }
                    t += b - a;
                }
                q += count;
            }
        };
        if (depthwise32_)
            rows(static_cast<int32_t *>(nullptr), kt.tap_rows32, ws.dw_acc32);
        else
            rows(static_cast<int64_t *>(nullptr), kt.tap_rows64, ws.dw_acc64);
    }

    // Whether multiply_depthwise adds -zw times the codes' own plane: an
    // exact plan's u is the code's value, so it folds zw into the taps.
    bool values_plane() const { return p_.w_zero_point != 0 && m_.plan() != Plan::ExactGemm; }
    // elements past a plane's slack that multiply_depthwise's rounded calls
    // read: whole vectors of int32 (tap_rows), whole 64-code vectors (tables)
    static constexpr int64_t kTapSlack = 16, kTableSlack = 64;

    // Image n's plane of channel g, Hp x Wp, plus (KW - 1) * dilation slack
    // that the last row's wide taps read (dropped columns) and the rounded
    // calls' slack more: through u into ws.dw_u, padded with u(zx), or for
    // tables its codes into ws.dw_codes, padded with zx's code; where
    // values_plane(), the codes' values into ws.dw_x, padded with zx, and
    // their sums over a kernel row's taps into ws.dw_box. Kept while the
    // next block is the same plane.
    void map_plane(int64_t n, int64_t g, Workspace &ws) const {
        if (ws.dw_key == n * G + g) return;
        ws.dw_key = n * G + g;
        ws.dw_box_end = 0;
        const bool table = table_taps();
        const Int16Factors &f = m_.int16_factors();
        const uint32_t mask = m_.operand_mask();
        const bool is_signed = m_.is_signed(), exact = m_.plan() == Plan::ExactGemm;
        const int64_t zx = p_.x_zero_point;
        const int64_t p0 = p_.padding[0], p1 = p_.padding[1];
        // the padding only: the image's part is written below
        const int64_t len = plane_len_ + (table ? kTableSlack : kTapSlack);
        auto pad = [&](auto &plane, auto fill) {
            plane.resize(static_cast<size_t>(len));
            auto *d = plane.data();
            if (H * W == 0) {  // all padding (and an empty x may be NULL)
                std::fill(d, d + len, fill);
                return;
            }
            std::fill(d, d + p0 * Wp + p1, fill);
            for (int64_t y = 0; y + 1 < H; ++y)
                std::fill(d + (p0 + y) * Wp + p1 + W, d + (p0 + y + 1) * Wp + p1, fill);
            std::fill(d + (p0 + H - 1) * Wp + p1 + W, d + len, fill);
        };
        if (table)
            pad(ws.dw_codes, static_cast<uint8_t>(zx));
        else
            pad(ws.dw_u, f.u[static_cast<uint8_t>(zx) & mask]);
        if (values_plane()) pad(ws.dw_x, static_cast<int32_t>(zx));
        if (H * W == 0) return;
        const int64_t *xs = p_.x.strides;
        const auto *x = static_cast<const uint8_t *>(p_.x.data) + n * xs[0] + g * xs[1];
        ws.dw_row.resize(static_cast<size_t>(W));
        for (int64_t y = 0; y < H; ++y) {
            const uint8_t *src = x + y * xs[2];
            if (table) {
                uint8_t *codes = ws.dw_codes.data() + (y + p0) * Wp + p1;
                if (xs[3] == 1)
                    std::memcpy(codes, src, static_cast<size_t>(W));
                else
                    for (int64_t c = 0; c < W; ++c) codes[c] = src[c * xs[3]];
            } else {
                int32_t *u = ws.dw_u.data() + (y + p0) * Wp + p1;
                if (exact) {  // u is the value: widened, not looked up
                    widen_bytes(src, xs[3], W, is_signed, u);
                } else if (u_bytes_ != 0 && xs[3] == 1) {  // looked up by vector (u8_lut), then widened
                    selected_kernels().u8_lut(W, src, map_x_, ws.dw_row.data());
                    widen_bytes(ws.dw_row.data(), 1, W, u_bytes_ < 0, u);
                } else {
                    for (int64_t c = 0; c < W; ++c) u[c] = f.u[src[c * xs[3]] & mask];
                }
            }
            if (values_plane())
                widen_bytes(src, xs[3], W, is_signed, ws.dw_x.data() + (y + p0) * Wp + p1);
        }
    }

    // ws.dw_box[e] for e < end: the sum of the KW codes' values a kernel
    // row reads from ws.dw_x[e] on (d1 apart), by vector rows, from where
    // this worker's earlier blocks of the plane left off (its first block
    // of a large plane stops at that block's last row; a second worker on
    // the plane starts again from its top): the zw term then costs a tap
    // per kernel row, not per tap.
    void kernel_row_sums(Workspace &ws, int64_t end) const {
        const int64_t d1 = p_.dilation[1];
        const int64_t from = ws.dw_box_end;
        end = std::min(end, static_cast<int64_t>(ws.dw_x.size()) - (KW - 1) * d1);
        if (end <= from) return;
        ws.dw_box.resize(static_cast<size_t>(end));
        std::fill(ws.dw_box.begin() + from, ws.dw_box.end(), 0);
        selected_kernels().tap_rows32(end - from, ws.dw_x.data() + from, 1, KW,
                                      tap_offsets_.data() + K + KH, tap_factors_.data() + K + KH,
                                      ws.dw_box.data() + from);
        ws.dw_box_end = end;
    }

    // count bytes from src (step apart) as int8 (as_signed) or uint8 into dst
    static void widen_bytes(const uint8_t *src, int64_t step, int64_t count, bool as_signed,
                            int32_t *dst) {
        auto widen = [&](auto type) {  // step 1 apart: the loop the compiler vectorizes
            using T = decltype(type);
            if (step == 1)
                for (int64_t c = 0; c < count; ++c) dst[c] = static_cast<T>(src[c]);
            else
                for (int64_t c = 0; c < count; ++c) dst[c] = static_cast<T>(src[c * step]);
        };
        if (as_signed)
            widen(int8_t{});
        else
            widen(uint8_t{});
    }

    // sums[t * sums_step] += code t of count from src (step apart), signed
    // as the multiplier (sums_step 0: their total into sums[0])
    void add_codes(const uint8_t *src, int64_t step, int64_t count, int64_t *sums,
                   int64_t sums_step) const {
        if (m_.is_signed()) {
            for (int64_t t = 0; t < count; ++t) sums[t * sums_step] += static_cast<int8_t>(src[t * step]);
        } else {
            for (int64_t t = 0; t < count; ++t) sums[t * sums_step] += src[t * step];
        }
    }

    // count codes from src (step apart) through map_x_ into dst
    void map_into(const uint8_t *src, int64_t step, int64_t count, uint8_t *dst) const {
        if (step == 1) {
            selected_kernels().u8_lut(count, src, map_x_, dst);
            return;
        }
        for (int64_t t = 0; t < count; ++t) dst[t] = map_x_[src[t * step]];
    }

    // fn(q, n, pixel, count) for each run of the block's pixels q..q+count
    // (image n, pixels from `pixel` on) that is contiguous in the output:
    // each image's part of the block where the indexing has no dropped
    // columns (one call, not one per output row: a 32x32 output's stage paid
    // a call per 32 values), each output row's part on the wide path, whose
    // dropped columns are skipped
    template <typename Fn>
    void for_runs(int64_t r0, int64_t np, const Fn &fn) const {
        if (row_len_ == OW) {
            for (int64_t q = 0; q < np;) {
                const int64_t r = r0 + q, n = r / Pr, u = r % Pr;
                const int64_t run = std::min(Pr - u, np - q);
                fn(q, n, u, run);
                q += run;
            }
            return;
        }
        for (int64_t q = 0; q < np;) {
            const int64_t r = r0 + q, n = r / Pr, u = r % Pr;
            const int64_t oy = u / row_len_, ox0 = u % row_len_;
            const int64_t run = std::min(row_len_ - ox0, np - q);
            const int64_t count = std::min(OW, ox0 + run) - ox0;  // real output columns
            if (count > 0) fn(q, n, oy * OW + ox0, count);
            q += run;
        }
    }

    // for_runs' runs with whole output rows of one image merged: fn(q, n,
    // pixel, rows, cols), rows of cols outputs, row_len_ apart in the block
    // and OW apart in the output (a 32x32 wide image: one call, not 32)
    template <typename Fn>
    void for_spans(int64_t r0, int64_t np, const Fn &fn) const {
        int64_t sq = 0, sn = 0, spixel = 0, rows = 0, cols = 0;
        for_runs(r0, np, [&](int64_t q, int64_t n, int64_t pixel, int64_t count) {
            if (rows > 0 && cols == OW && count == OW && n == sn && q == sq + rows * row_len_ &&
                pixel == spixel + rows * OW) {
                ++rows;
                return;
            }
            if (rows > 0) fn(sq, sn, spixel, rows, cols);
            sq = q, sn = n, spixel = pixel, rows = 1, cols = count;
        });
        if (rows > 0) fn(sq, sn, spixel, rows, cols);
    }

    // channels x pixels back to N O OH OW (or the staging copy), one output
    // row's run at a time
    void scatter(int64_t g, int64_t r0, int64_t np, const int64_t *sums,
                 const int64_t *pixel_term, const int32_t *pixel_term32) const {
        if (P == 1) {  // 1x1 outputs: the block's images transposed out in tiles
            auto *out = static_cast<char *>(const_cast<void *>(target_.data)) +
                        (r0 * target_.strides[0] + g * Og * target_.strides[1]) *
                            static_cast<int64_t>(dtype_size(target_.dtype));
            auto run = [&](const auto *typed_sums, const auto *term) {
                if (target_.dtype == APPROXMUL_INT32)
                    scatter_images(typed_sums, term, np, reinterpret_cast<int32_t *>(out));
                else
                    scatter_images(typed_sums, term, np, reinterpret_cast<int64_t *>(out));
            };
            if (out_dtype_ == APPROXMUL_INT32)
                run(reinterpret_cast<const int32_t *>(sums), pixel_term32);
            else
                run(sums, pixel_term);
            return;
        }
        for_runs(r0, np, [&](int64_t q, int64_t n, int64_t pixel, int64_t count) {
            for (int64_t o = 0; o < Og; ++o) {
                const int64_t e = o * block_ + q;
                const int64_t base = n * target_.strides[0] + (g * Og + o) * target_.strides[1];
                const int64_t start = plane_contiguous_ ? pixel : -1;
                const int64_t *term = pixel_term ? pixel_term + q : nullptr;
                if (out_dtype_ == APPROXMUL_INT32)
                    scatter_run(reinterpret_cast<const int32_t *>(sums) + e,
                                pixel_term32 ? pixel_term32 + q : nullptr, count, base,
                                pixel_offsets_.data() + pixel, start, target_);
                else
                    scatter_run(sums + e, term, count, base, pixel_offsets_.data() + pixel, start,
                                target_);
            }
        });
    }

    // Channel-major sums (Og x block_) of np 1x1 images into out (image
    // t's channel o at t * strides[0] + o * strides[1] of the target), plus
    // their x cross terms: a transpose, in 16 x 16 tiles whose reads and
    // writes are whole cache lines (channel by channel over a block, each
    // write a new line: two thirds of a 64->256 layer over 25088 images).
    template <typename Sum, typename Term, typename Out>
    void scatter_images(const Sum *sums, const Term *term, int64_t np, Out *out) const {
        constexpr int64_t kTile = 16;
        const int64_t image_step = target_.strides[0], channel_step = target_.strides[1];
        for (int64_t t0 = 0; t0 < np; t0 += kTile) {
            const int64_t t1 = std::min(np, t0 + kTile);
            for (int64_t o0 = 0; o0 < Og; o0 += kTile) {
                const int64_t o1 = std::min(Og, o0 + kTile);
                for (int64_t t = t0; t < t1; ++t) {
                    const Term add = term != nullptr ? term[t] : Term{0};
                    Out *dst = out + t * image_step;
                    for (int64_t o = o0; o < o1; ++o)
                        dst[o * channel_step] = static_cast<Out>(add_term(sums[o * block_ + t], add));
                }
            }
        }
    }

    int64_t stage_item() const {
        const Conv2dOutputStage &s = *p_.stage;
        return s.real_bytes != 0 ? s.real_bytes : static_cast<int64_t>(dtype_size(s.code_dtype));
    }

    // Requantizes n final sums (int64 if acc64, else int32) of output
    // channel oc into codes of the stage's code type.
    void requantize_row(int64_t oc, const void *acc, bool acc64, int64_t n, char *codes) const {
        static const int32_t kZeroBias = 0;
        const Conv2dOutputStage &s = *p_.stage;
        selected_kernels().requantize(n, acc, acc64 ? 1 : 0,
                                      s.bias != nullptr ? s.bias + oc : &kZeroBias,
                                      s.mantissa + oc, s.shift + oc, 0, s.zero_point, s.qmin,
                                      s.qmax, s.single, s.code_dtype, codes);
    }

    // n codes to out: copied, or their real values written there.
    void emit_codes(const char *codes, int64_t n, char *out) const {
        const Conv2dOutputStage &s = *p_.stage;
        if (s.real_bytes == 0) {
            copy_bytes(out, codes, n, static_cast<int64_t>(dtype_size(s.code_dtype)));
        } else {
            const int32_t zero = s.zero_point;
            selected_kernels().dequantize(n, codes, s.code_dtype, &s.scale, &zero, 0,
                                          s.real_bytes == 8 ? 1 : 0, out);
        }
    }

    // The stage over one block, channel by channel. int32 sums and
    // accumulators (the common case): stage_rows_block. Otherwise the final
    // sums (the GEMM's plus the x cross term, in the accumulators' type)
    // through requantize_row into a row of the block, then its runs to out.
    // The accumulators' type bounds every final sum, so int32 ones add
    // modulo 2^32.
    void stage_block(int64_t g, int64_t r0, int64_t np, Workspace &ws) const {
        if (image_sums_) {
            stage_images(g, r0, np, ws);
            return;
        }
        const bool acc64 = p_.out.dtype == APPROXMUL_INT64, sums64 = out_dtype_ == APPROXMUL_INT64;
        if (!acc64 && !sums64) {
            stage_rows_block(g, r0, np, ws);
            return;
        }
        const int64_t item = stage_item();
        const auto code_item = static_cast<int64_t>(dtype_size(p_.stage->code_dtype));
        ws.acc.resize(static_cast<size_t>(block_));
        ws.stage_codes.resize(static_cast<size_t>(block_) * 2);
        // real values of short output rows (8x8 images): a dequantize call
        // per row of 8 cost more than dequantizing the block's row at once
        const bool short_runs = p_.stage->real_bytes != 0 && OW < 32;
        if (short_runs) ws.stage_out.resize(static_cast<size_t>(block_ * item));
        auto *acc32 = reinterpret_cast<int32_t *>(ws.acc.data());
        for (int64_t o = 0; o < Og; ++o) {
            const int64_t oc = g * Og + o;
            const int64_t *row64 = ws.out.data() + o * block_;
            const int32_t *row32 = reinterpret_cast<const int32_t *>(ws.out.data()) + o * block_;
            const void *acc = sums64 ? static_cast<const void *>(row64) : row32;
            if (fold_x_sums_ || sums64 != acc64) {
                const int64_t *term = fold_x_sums_ ? ws.pixel_term.data() : nullptr;
                for (int64_t t = 0; t < np; ++t) {
                    const int64_t sum = (sums64 ? row64[t] : row32[t]) + (term ? term[t] : 0);
                    if (acc64)
                        ws.acc[static_cast<size_t>(t)] = sum;
                    else
                        acc32[t] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(sum)));
                }
                acc = ws.acc.data();
            }
            requantize_row(oc, acc, acc64, np, ws.stage_codes.data());
            const char *values = ws.stage_codes.data();
            int64_t value_item = code_item;
            if (short_runs) {  // one call for the row, then plain copies
                emit_codes(values, np, ws.stage_out.data());
                values = ws.stage_out.data(), value_item = item;
            }
            auto *out = static_cast<char *>(p_.stage->out);
            for_runs(r0, np, [&](int64_t q, int64_t n, int64_t pixel, int64_t count) {
                char *dst = out + ((n * O + oc) * P + pixel) * item;
                if (short_runs)
                    copy_bytes(dst, values + q * item, count, item);
                else
                    emit_codes(values + q * value_item, count, dst);
            });
        }
    }

    // The stage of 1x1 outputs (a classifier or squeeze-excitation layer
    // after a global pool), whose sums the GEMM wrote pixel-major: each
    // image's Og channels requantized in one call with per-channel
    // parameters, then written (or their real values) as one run of out.
    // (Channel by channel, each call handled a column of one-value rows: a
    // 64-image 1024->1024 layer's stage took three times its GEMM.)
    void stage_images(int64_t g, int64_t r0, int64_t np, Workspace &ws) const {
        const Conv2dOutputStage &s = *p_.stage;
        const bool acc64 = out_dtype_ == APPROXMUL_INT64;
        const auto sum_bytes = static_cast<int64_t>(dtype_size(out_dtype_));
        const int64_t item = stage_item();
        ws.stage_codes.resize(static_cast<size_t>(Og) * 2);
        ws.zero_bias.resize(s.bias == nullptr ? static_cast<size_t>(Og) : 0, 0);
        const int32_t *bias = s.bias != nullptr ? s.bias + g * Og : ws.zero_bias.data();
        const char *sums = reinterpret_cast<const char *>(ws.out.data());
        auto *out = static_cast<char *>(s.out);
        for (int64_t t = 0; t < np; ++t) {
            selected_kernels().requantize(Og, sums + t * Og * sum_bytes, acc64 ? 1 : 0, bias,
                                          s.mantissa + g * Og, s.shift + g * Og, 1, s.zero_point,
                                          s.qmin, s.qmax, s.single, s.code_dtype,
                                          ws.stage_codes.data());
            emit_codes(ws.stage_codes.data(), Og, out + ((r0 + t) * O + g * Og) * item);
        }
    }

    // stage_block's common case, int32 sums: the sum, its x cross term,
    // requantization and (for real values) dequantization in one kernel
    // pass per span of whole output rows, straight into out.
    void stage_rows_block(int64_t g, int64_t r0, int64_t np, Workspace &ws) const {
        const int32_t *term = fold_x_sums_ ? ws.pixel_term32.data() : nullptr;
        const int64_t item = stage_item();
        // the spans once per block, not once per channel (each output row
        // of for_runs costs a division; 6 % of a 16->16 32x32 layer)
        ws.spans.clear();
        if (P == 1)  // 1x1 outputs: the block's images are the rows of one span, O apart in out
            ws.spans.push_back({0, r0 / Pr, 0, np, 1});
        else
            for_spans(r0, np, [&](int64_t q, int64_t n, int64_t pixel, int64_t rows, int64_t cols) {
                ws.spans.push_back({q, n, pixel, rows, cols});
            });
        const int64_t out_row_stride = P == 1 ? O : OW;
        auto *out = static_cast<char *>(p_.stage->out);
        for (int64_t o = 0; o < Og; ++o) {
            const int64_t oc = g * Og + o;
            const int32_t *row = reinterpret_cast<const int32_t *>(ws.out.data()) + o * block_;
            for (const auto &[q, n, pixel, rows, cols] : ws.spans)
                stage_rows(oc, row + q, term == nullptr ? nullptr : term + q, rows, cols, row_len_,
                           out + ((n * O + oc) * P + pixel) * item, out_row_stride);
        }
    }

    // Output channel oc's int32 sums (plus term), rows of cols sums_row
    // apart, through the stage into out's rows out_row_stride apart.
    void stage_rows(int64_t oc, const int32_t *sums, const int32_t *term, int64_t rows,
                    int64_t cols, int64_t sums_row, char *out, int64_t out_row_stride) const {
        const Conv2dOutputStage &s = *p_.stage;
        const int32_t bias = s.bias != nullptr ? s.bias[oc] : 0;
        // sums within the bound plus this bias cannot leave int32: no saturation
        const int saturate = sum_bound_ + std::llabs(int64_t{bias}) > std::numeric_limits<int32_t>::max();
        selected_kernels().requantize_rows(rows, cols, sums, term, sums_row, bias, s.mantissa[oc],
                                           s.shift[oc], s.zero_point, s.qmin, s.qmax, s.single,
                                           saturate, s.scale, static_cast<int>(stage_item()),
                                           s.real_bytes != 0 ? 1 : 0, out, out_row_stride);
    }

    const Conv2dProblem &p_;
    const Multiplier &m_;
    const int64_t N, C, H, W, O, KH, KW, OH, OW, G, Cg, Og, K, P;
    const int64_t item_;    // bytes per x element
    const size_t w_item_;   // bytes per w element
    // pointwise layers: x's step between pixels in an image, and across the
    // batch (0: none; pixel_chain)
    const int64_t pixel_step_, batch_step_;
    const bool depthwise_;    // multiply_depthwise, not GEMMs
    const bool fold_x_sums_;  // the x cross term is added here, not by the GEMM
    const int64_t Wp, Hp;       // the padded image
    const bool wide_;           // pixels over the padded width (gather_wide)
    const int64_t row_len_, Pr;  // pixels per output row and per image as indexed
    const int64_t plane_len_;   // codes per padded channel plane
    const bool sums32_;         // wide path: the x cross term's code sums in int32
    const bool padded_rows_;    // per-row path: taps copied from a padded image (gather_padded)
    // the same steps in out, and whether the GEMMs write there (set_target)
    int64_t out_pixel_step_ = 0, out_batch_step_ = 0;
    bool direct_ = false;
    // 1x1 outputs of a pointwise layer with a stage: the GEMMs' sums pixel-major
    bool image_sums_ = false;
    const approxmul_dtype out_dtype_;  // of the GEMM's sums
    const int64_t sum_bound_;          // on |final sum| (accumulator_bound), for the stage
    Scratch<char> weights_;               // the weights regrouped, where they must be
    const char *weight_codes_ = nullptr;  // the GEMMs' weights: p_.w's data or weights_
    char zero_code_[2] = {0, 0};
    // mapped codes (choose_mapping): the GEMMs' exact multiplier, the maps
    // by raw byte, and each output channel's sum of original weight codes
    const Multiplier *gemm_m_ = &m_;
    bool mapped_ = false;
    bool raw_pointwise_ = false;  // in-place pointwise blocks on m_ itself (choose_mapping)
    bool raw_only_ = false;       // every block so: the weights are not mapped (group_weights)
    bool depthwise32_ = false;    // multiply_depthwise's sums in int32 (size_depthwise)
    bool lanes_ = false;          // depthwise jobs of kDepthwiseLanes channels (size_depthwise)
    std::vector<int32_t> lane_factors_;  // and their factors and constants (set_lane_factors)
    std::vector<int64_t> lane_offsets_;
    int64_t lane_block_ = 0;
    int u_bytes_ = 0;             // depthwise: u fits uint8 (1) or int8 (-1), map_x_ its bytes
    std::vector<int64_t> tap_offsets_;  // depthwise: tap_rows' offsets (size_depthwise)
    std::vector<int32_t> tap_factors_;  // and their factors past the K taps
    uint8_t map_x_[256] = {}, map_w_[256] = {};
    std::vector<int64_t> w_sums_;
    int64_t block_ = 0, pixel_blocks_ = 0;
    bool jobs_in_parallel_ = false;
    std::vector<int64_t> staged_;  // the whole output, for failing-capable models only
    TensorView target_{};
    std::vector<int64_t> pixel_offsets_;
    bool plane_contiguous_ = false;
    std::vector<int64_t> tap_x0_, tap_lo_, tap_hi_;  // per kernel column (set_tap_columns)
};

}  // namespace

void conv2d(const Conv2dProblem &p) {
    Conv2dRun run(p);
    if (run.empty()) return;
    const int threads = num_threads();
    run.prepare(threads);
    const bool outer = run.jobs_in_parallel();  // else each matmul uses the threads
    if (outer) {
        parallel_for_each<Conv2dRun::Workspace>(
            run.jobs(), threads, [&](int64_t job, Conv2dRun::Workspace &ws) { run.run_job(job, ws, 1); });
    } else {
        Conv2dRun::Workspace ws;
        for (int64_t job = 0; job < run.jobs(); ++job) run.run_job(job, ws, 0);
    }
    if (run.staged()) run.write_staged();
}

}  // namespace approxmul::kernels
