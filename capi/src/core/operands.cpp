#include "operands.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "error.hpp"

namespace approxmul {

size_t dtype_size(approxmul_dtype dtype) {
    switch (dtype) {
    case APPROXMUL_INT8:
    case APPROXMUL_UINT8: return 1;
    case APPROXMUL_INT16:
    case APPROXMUL_UINT16: return 2;
    case APPROXMUL_INT32: return 4;
    case APPROXMUL_INT64: return 8;
    }
    return 0;
}

const char *dtype_name(approxmul_dtype dtype) {
    switch (dtype) {
    case APPROXMUL_INT8: return "int8";
    case APPROXMUL_UINT8: return "uint8";
    case APPROXMUL_INT16: return "int16";
    case APPROXMUL_UINT16: return "uint16";
    case APPROXMUL_INT32: return "int32";
    case APPROXMUL_INT64: return "int64";
    }
    return "unknown";
}

int64_t checked_mul(int64_t a, int64_t b, const char *what) {
    int64_t result;
    if (__builtin_mul_overflow(a, b, &result))
        fail(APPROXMUL_ERR_OVERFLOW, "%s: size computation overflows 64 bits", what);
    return result;
}

int64_t checked_add(int64_t a, int64_t b, const char *what) {
    int64_t result;
    if (__builtin_add_overflow(a, b, &result))
        fail(APPROXMUL_ERR_OVERFLOW, "%s: size computation overflows 64 bits", what);
    return result;
}

int64_t checked_layout_count(int64_t outer, int64_t channels, int64_t inner) {
    if (outer < 0 || channels < 0 || inner < 0)
        fail(APPROXMUL_ERR_SHAPE, "sizes must not be negative (outer=%lld, channels=%lld, "
             "inner=%lld)", static_cast<long long>(outer), static_cast<long long>(channels),
             static_cast<long long>(inner));
    const int64_t count = checked_mul(checked_mul(outer, channels, "outer*channels"), inner,
                                      "outer*channels*inner");
    checked_mul(count, 8, "size in bytes");
    return count;
}

void check_code_range(int64_t qmin, int64_t qmax, approxmul_dtype dtype) {
    const bool is_signed = dtype == APPROXMUL_INT8 || dtype == APPROXMUL_INT16;
    const int64_t bits = 8 * static_cast<int64_t>(dtype_size(dtype));
    const int64_t lo = is_signed ? -(int64_t(1) << (bits - 1)) : 0;
    const int64_t hi = is_signed ? (int64_t(1) << (bits - 1)) - 1 : (int64_t(1) << bits) - 1;
    if (qmin > qmax || qmin < lo || qmax > hi)
        fail(APPROXMUL_ERR_OUT_OF_RANGE, "qmin..qmax = %lld..%lld is not a range within %s",
             static_cast<long long>(qmin), static_cast<long long>(qmax), dtype_name(dtype));
}

void check_sizes(int64_t rows, int64_t cols, int64_t inner) {
    if (rows < 0 || cols < 0 || inner < 0)
        fail(APPROXMUL_ERR_SHAPE, "sizes must not be negative (rows=%lld, cols=%lld, inner=%lld)",
             static_cast<long long>(rows), static_cast<long long>(cols),
             static_cast<long long>(inner));
    // the work count must be representable, whatever the kernel
    checked_mul(checked_mul(rows, cols, "rows*cols"), std::max<int64_t>(inner, 1),
                "rows*cols*inner");
}

void MatrixView::byte_range(intptr_t &lo, intptr_t &hi) const {
    lo = hi = reinterpret_cast<intptr_t>(data);
    if (rows == 0 || cols == 0) return;
    const int64_t size = static_cast<int64_t>(dtype_size(dtype));
    int64_t low = 0, high = 0;  // element offsets of the extreme elements
    for (auto [n, stride] : {std::pair{rows, row_stride}, std::pair{cols, col_stride}}) {
        const int64_t span = checked_mul(n - 1, stride, name);
        (span < 0 ? low : high) = checked_add(span < 0 ? low : high, span, name);
    }
    const int64_t low_bytes = checked_mul(low, size, name);
    const int64_t high_bytes = checked_add(checked_mul(high, size, name), size, name);
    // The span must also exist as addresses: a view that would reach below
    // address 0 or past the top of the address space is no real array, and
    // computing pointers into it is already undefined behaviour.
    static_assert(sizeof(intptr_t) == sizeof(int64_t), "64-bit address arithmetic");
    int64_t first, last;
    if (__builtin_add_overflow(static_cast<int64_t>(lo), low_bytes, &first) || first < 0 ||
        __builtin_add_overflow(static_cast<int64_t>(hi), high_bytes, &last))
        fail(APPROXMUL_ERR_OVERFLOW, "%s: strides (%lld, %lld) span beyond the address space",
             name, static_cast<long long>(row_stride), static_cast<long long>(col_stride));
    lo = static_cast<intptr_t>(first);
    hi = static_cast<intptr_t>(last);
}

void check_zero_point(int64_t zero_point, const char *name, const Multiplier &m) {
    if (zero_point < m.min_operand() || zero_point > m.max_operand())
        fail(APPROXMUL_ERR_OUT_OF_RANGE, "%s: %lld is not a %d-bit %s code (%lld..%lld)", name,
             static_cast<long long>(zero_point), m.bits(), m.is_signed() ? "signed" : "unsigned",
             static_cast<long long>(m.min_operand()), static_cast<long long>(m.max_operand()));
}

namespace {

// Whether every one of n codes at p, s elements apart, lies in lo..hi: a
// plain min/max loop that vectorises, run before the element-wise search
// that names the first offender (a load through the dtype switch per
// element cost as much as a 4-bit GEMM's kernel).
template <typename T>
bool run_in_range(const T *p, int64_t n, int64_t s, int64_t lo, int64_t hi) {
    T a = p[0], b = p[0];
    if (s == 1) {
        for (int64_t i = 1; i < n; ++i) a = std::min(a, p[i]), b = std::max(b, p[i]);
    } else {
        for (int64_t i = 1; i < n; ++i) a = std::min(a, p[i * s]), b = std::max(b, p[i * s]);
    }
    return a >= lo && b <= hi;
}

// run_in_range over `runs` runs of n codes, run r starting at element
// offset(r) of data (an operand type).
template <typename Offset>
bool runs_in_range(const void *data, int dtype, int64_t runs, int64_t n, int64_t s,
                   const Offset &offset, int64_t lo, int64_t hi) {
    auto all = [&](const auto *base) {
        for (int64_t r = 0; r < runs; ++r)
            if (!run_in_range(base + offset(r), n, s, lo, hi)) return false;
        return true;
    };
    switch (dtype) {
    case APPROXMUL_INT8: return all(static_cast<const int8_t *>(data));
    case APPROXMUL_UINT8: return all(static_cast<const uint8_t *>(data));
    case APPROXMUL_INT16: return all(static_cast<const int16_t *>(data));
    default: return all(static_cast<const uint16_t *>(data));
    }
}

}  // namespace

void check_operand(const MatrixView &v, const Multiplier &m) {
    const bool is_signed_type = v.dtype == APPROXMUL_INT8 || v.dtype == APPROXMUL_INT16;
    const bool is_operand_type = v.dtype == APPROXMUL_INT8 || v.dtype == APPROXMUL_UINT8 ||
                                 v.dtype == APPROXMUL_INT16 || v.dtype == APPROXMUL_UINT16;
    if (!is_operand_type || is_signed_type != m.is_signed())
        fail(APPROXMUL_ERR_DTYPE, "%s: element type %s does not suit a %d-bit %s multiplier "
             "(expected %s)", v.name, dtype_name(v.dtype), m.bits(),
             m.is_signed() ? "signed" : "unsigned",
             m.bits() <= 8 ? (m.is_signed() ? "int8 or int16" : "uint8 or uint16")
                           : (m.is_signed() ? "int16" : "uint16"));
    if (v.rows > 0 && v.cols > 0) require_pointer(v.data, v.name);
    const int storage_bits = static_cast<int>(dtype_size(v.dtype)) * 8;
    if (storage_bits < m.bits())
        fail(APPROXMUL_ERR_DTYPE, "%s: %s cannot hold %d-bit operands", v.name,
             dtype_name(v.dtype), m.bits());
    intptr_t lo, hi;
    v.byte_range(lo, hi);  // rejects strides whose extent overflows
    if (storage_bits == m.bits()) return;  // every stored value is a valid operand
    if (v.rows == 0 || v.cols == 0) return;
    // runs along the shorter stride
    const bool along_rows = std::llabs(v.col_stride) <= std::llabs(v.row_stride);
    const int64_t runs = along_rows ? v.rows : v.cols, n = along_rows ? v.cols : v.rows;
    const int64_t step = along_rows ? v.col_stride : v.row_stride;
    const int64_t jump = along_rows ? v.row_stride : v.col_stride;
    if (runs_in_range(v.data, v.dtype, runs, n, step, [&](int64_t r) { return r * jump; },
                      m.min_operand(), m.max_operand()))
        return;
    for (int64_t i = 0; i < v.rows; ++i)
        for (int64_t j = 0; j < v.cols; ++j) {
            const int64_t value = load(v, i, j);
            if (value < m.min_operand() || value > m.max_operand())
                fail(APPROXMUL_ERR_OUT_OF_RANGE,
                     "%s[%lld, %lld] = %lld is outside the %d-bit %s operand range %lld..%lld",
                     v.name, static_cast<long long>(i), static_cast<long long>(j),
                     static_cast<long long>(value), m.bits(),
                     m.is_signed() ? "signed" : "unsigned",
                     static_cast<long long>(m.min_operand()),
                     static_cast<long long>(m.max_operand()));
        }
}

namespace {

bool overlaps(const MatrixView &x, const MatrixView &y) {
    intptr_t xlo, xhi, ylo, yhi;
    x.byte_range(xlo, xhi);
    y.byte_range(ylo, yhi);
    return xlo < xhi && ylo < yhi && xlo < yhi && ylo < xhi;
}

// True when no two (i, j) map to one element: with the shorter non-trivial
// stride s1 over n1 elements, the longer one must step past all of them.
// This rejects exotic interleaved layouts too; outputs never need those.
bool is_injective(const MatrixView &v) {
    int64_t s1 = v.cols > 1 ? std::llabs(v.col_stride) : 0;
    int64_t n1 = v.cols;
    int64_t s2 = v.rows > 1 ? std::llabs(v.row_stride) : 0;
    int64_t n2 = v.rows;
    if (n1 <= 1) return n2 <= 1 || s2 >= 1;
    if (n2 <= 1) return s1 >= 1;
    if (s1 > s2) std::swap(s1, s2), std::swap(n1, n2);
    return s1 >= 1 && s2 / n1 >= s1;
}

}  // namespace

void check_output(const MatrixView &out, const MatrixView &a, const MatrixView &b) {
    if (out.dtype != APPROXMUL_INT32 && out.dtype != APPROXMUL_INT64)
        fail(APPROXMUL_ERR_DTYPE, "%s: element type %s; outputs are int32 or int64", out.name,
             dtype_name(out.dtype));
    if (out.rows == 0 || out.cols == 0) return;
    require_pointer(out.data, out.name);
    if (!is_injective(out))
        fail(APPROXMUL_ERR_ALIASING, "%s: strides (%lld, %lld) make elements overlap", out.name,
             static_cast<long long>(out.row_stride), static_cast<long long>(out.col_stride));
    for (const MatrixView *input : {&a, &b})
        if (overlaps(out, *input))
            fail(APPROXMUL_ERR_ALIASING, "%s overlaps input %s", out.name, input->name);
}

int64_t TensorView::size() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) {
        if (shape[d] < 0)
            fail(APPROXMUL_ERR_SHAPE, "%s: dimension %d has negative size %lld", name, d,
                 static_cast<long long>(shape[d]));
        n = checked_mul(n, shape[d], name);
    }
    return n;
}

void TensorView::byte_range(intptr_t &lo, intptr_t &hi) const {
    lo = hi = reinterpret_cast<intptr_t>(data);
    if (size() == 0) return;
    const int64_t item = static_cast<int64_t>(dtype_size(dtype));
    int64_t low = 0, high = 0;
    for (int d = 0; d < ndim; ++d) {
        const int64_t span = checked_mul(shape[d] - 1, strides[d], name);
        (span < 0 ? low : high) = checked_add(span < 0 ? low : high, span, name);
    }
    const int64_t low_bytes = checked_mul(low, item, name);
    const int64_t high_bytes = checked_add(checked_mul(high, item, name), item, name);
    // As for MatrixView: the span must exist as addresses.
    int64_t first, last;
    if (__builtin_add_overflow(static_cast<int64_t>(lo), low_bytes, &first) || first < 0 ||
        __builtin_add_overflow(static_cast<int64_t>(hi), high_bytes, &last))
        fail(APPROXMUL_ERR_OVERFLOW, "%s: strides span beyond the address space", name);
    lo = static_cast<intptr_t>(first);
    hi = static_cast<intptr_t>(last);
}

void check_tensor_operand(const TensorView &v, const Multiplier &m) {
    const int64_t n = v.size();
    check_operand(MatrixView{v.name, v.dtype, v.data, 0, 0, 0, 0}, m);  // element type
    if (n == 0) return;
    require_pointer(v.data, v.name);
    intptr_t lo, hi;
    v.byte_range(lo, hi);  // rejects strides whose extent overflows
    if (static_cast<int>(dtype_size(v.dtype)) * 8 == m.bits()) return;
    // runs along the last dimension first; the walk below names an offender
    const int last = v.ndim - 1;
    int64_t outer = 1;
    for (int d = 0; d < last; ++d) outer *= v.shape[d];
    auto run_start = [&](int64_t r) {
        int64_t offset = 0;
        for (int d = last - 1; d >= 0; --d) offset += (r % v.shape[d]) * v.strides[d], r /= v.shape[d];
        return offset;
    };
    if (runs_in_range(v.data, v.dtype, outer, v.shape[last], v.strides[last], run_start,
                      m.min_operand(), m.max_operand()))
        return;
    // every value, walking the tensor's own strides
    int64_t index[4] = {0, 0, 0, 0};
    for (int64_t e = 0; e < n; ++e) {
        int64_t offset = 0;
        for (int d = 0; d < v.ndim; ++d) offset += index[d] * v.strides[d];
        const MatrixView one{v.name, v.dtype, static_cast<const char *>(v.data) +
                                                  offset * static_cast<int64_t>(dtype_size(v.dtype)),
                             1, 1, 0, 0};
        const int64_t value = load(one, 0, 0);
        if (value < m.min_operand() || value > m.max_operand())
            fail(APPROXMUL_ERR_OUT_OF_RANGE,
                 "%s: element %lld (in storage order) = %lld is outside the %d-bit %s operand "
                 "range %lld..%lld", v.name, static_cast<long long>(e),
                 static_cast<long long>(value), m.bits(), m.is_signed() ? "signed" : "unsigned",
                 static_cast<long long>(m.min_operand()), static_cast<long long>(m.max_operand()));
        for (int d = v.ndim - 1; d >= 0; --d) {
            if (++index[d] < v.shape[d]) break;
            index[d] = 0;
        }
    }
}

void check_tensor_output(const TensorView &out, const TensorView &a, const TensorView &b) {
    if (out.dtype != APPROXMUL_INT32 && out.dtype != APPROXMUL_INT64)
        fail(APPROXMUL_ERR_DTYPE, "%s: element type %s; outputs are int32 or int64", out.name,
             dtype_name(out.dtype));
    if (out.size() == 0) return;
    require_pointer(out.data, out.name);
    // Injective when, sorted by |stride|, each stride steps past everything
    // the smaller ones reach (what every ordinary strided layout satisfies).
    const int ndim = std::min(out.ndim, kMaxTensorDims);
    int order[kMaxTensorDims] = {0, 1, 2, 3};
    // insertion sort: at most 4 entries (std::sort trips GCC 12's -Warray-bounds here)
    for (int i = 1; i < ndim; ++i)
        for (int j = i; j > 0 && std::llabs(out.strides[order[j - 1]]) >
                                     std::llabs(out.strides[order[j]]); --j)
            std::swap(order[j - 1], order[j]);
    int64_t reach = 0;  // largest element offset the smaller dimensions cover
    for (int o = 0; o < ndim; ++o) {
        const int d = order[o];
        if (out.shape[d] <= 1) continue;
        const int64_t s = std::llabs(out.strides[d]);
        if (s <= reach)
            fail(APPROXMUL_ERR_ALIASING, "%s: stride %lld of dimension %d makes elements overlap",
                 out.name, static_cast<long long>(out.strides[d]), d);
        reach = checked_add(reach, checked_mul(s, out.shape[d] - 1, out.name), out.name);
    }
    intptr_t olo, ohi;
    out.byte_range(olo, ohi);
    for (const TensorView *input : {&a, &b}) {
        intptr_t lo, hi;
        input->byte_range(lo, hi);
        if (lo < hi && olo < hi && lo < ohi)
            fail(APPROXMUL_ERR_ALIASING, "%s overlaps input %s", out.name, input->name);
    }
}

int64_t accumulator_bound(const Multiplier &m, int64_t inner, int64_t a_zero_point,
                          int64_t b_zero_point) {
    if (inner < 0)
        fail(APPROXMUL_ERR_SHAPE, "inner size %lld is negative", static_cast<long long>(inner));
    check_zero_point(a_zero_point, "a_zero_point", m);
    check_zero_point(b_zero_point, "b_zero_point", m);
    // Bound on one zero-point adjusted term |M(a,b) - zb*a - za*b + za*zb|.
    const int64_t max_operand = std::max(-m.min_operand(), m.max_operand());
    const int64_t term = m.max_abs_product() + std::llabs(b_zero_point) * max_operand +
                         std::llabs(a_zero_point) * max_operand +
                         std::llabs(a_zero_point * b_zero_point);
    int64_t bound;
    if (__builtin_mul_overflow(term, std::max<int64_t>(inner, 1), &bound))
        fail(APPROXMUL_ERR_OVERFLOW,
             "inner size %lld: sums of up to %lld-magnitude products can overflow int64",
             static_cast<long long>(inner), static_cast<long long>(term));
    return bound;
}

approxmul_dtype accumulator_dtype(const Multiplier &m, int64_t inner, int64_t a_zero_point,
                                  int64_t b_zero_point) {
    return accumulator_bound(m, inner, a_zero_point, b_zero_point) <=
                   std::numeric_limits<int32_t>::max()
               ? APPROXMUL_INT32
               : APPROXMUL_INT64;
}

void check_output_type(const char *name, approxmul_dtype dtype, const Multiplier &m,
                       int64_t inner, int64_t a_zero_point, int64_t b_zero_point) {
    // always computed: it also checks the zero points and that sums fit int64
    const approxmul_dtype needed = accumulator_dtype(m, inner, a_zero_point, b_zero_point);
    if (dtype == APPROXMUL_INT32 && needed == APPROXMUL_INT64)
        fail(APPROXMUL_ERR_OVERFLOW,
             "%s: int32 can overflow summing %lld products of up to %lld in magnitude "
             "(with the zero points); use an int64 output",
             name, static_cast<long long>(inner), static_cast<long long>(m.max_abs_product()));
}

}  // namespace approxmul
