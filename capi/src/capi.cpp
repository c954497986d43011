// The C ABI of the core: versions, threads, multipliers and kernels. Every
// exported function is noexcept and runs its body through guarded()
// (core/boundary.hpp), the one place where C++ exceptions become status
// codes and the calling thread's error message.
#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "approxmul.h"
#include "capi_arguments.hpp"
#include "core/boundary.hpp"
#include "core/error.hpp"
#include "core/multiplier.hpp"
#include "core/operands.hpp"
#include "core/threads.hpp"
#include "kernels/kernels.hpp"
#include "multipliers/library.hpp"
#include "netlist/netlist.hpp"

#ifndef APPROXMUL_VERSION
#error "APPROXMUL_VERSION must be defined by the build"
#endif

struct approxmul_multiplier {
    std::shared_ptr<const approxmul::Multiplier> impl;
};

struct approxmul_netlist {
    std::shared_ptr<const approxmul::netlist::Netlist> impl;
};

namespace approxmul {

std::string &last_error_message() {
    thread_local std::string message;
    return message;
}

}  // namespace approxmul

namespace {

using namespace approxmul;

const Multiplier &get(const approxmul_multiplier *m) {
    require_pointer(m, "multiplier");
    return *m->impl;
}

void hand_out(std::shared_ptr<const Multiplier> impl, approxmul_multiplier **out) {
    *out = new approxmul_multiplier{std::move(impl)};
}

// Validates a, b and c of an operation before anything is computed.
void check_operation(const Multiplier &m, const MatrixView &a, const MatrixView &b,
                     const MatrixView &c, int64_t inner, int64_t a_zero, int64_t b_zero) {
    check_operand(a, m);
    check_operand(b, m);
    check_output_type(c.name, c.dtype, m, inner, a_zero, b_zero);
    check_output(c, a, b);
}

void copy4(const int64_t *values, const char *name, int64_t *out, int count = 4) {
    require_pointer(values, name);
    for (int d = 0; d < count; ++d) out[d] = values[d];
}

}  // namespace

namespace approxmul {

kernels::Conv2dProblem conv2d_arguments(const approxmul_multiplier *m,
                                        const approxmul_dtype &x_dtype, const void *x,
                                        const int64_t *x_shape, const int64_t *x_strides,
                                        const approxmul_dtype &w_dtype, const void *w,
                                        const int64_t *w_shape, const int64_t *w_strides,
                                        const int64_t *stride, const int64_t *padding,
                                        const int64_t *dilation, int64_t groups,
                                        int64_t x_zero_point, int64_t w_zero_point) {
    kernels::Conv2dProblem p{&get(m),
                             {"x", dtype_argument(x_dtype, "x"), x, 4, {}, {}},
                             {"w", dtype_argument(w_dtype, "w"), w, 4, {}, {}},
                             {"out", APPROXMUL_INT64, nullptr, 4, {}, {}},
                             {}, {}, {}, groups, x_zero_point, w_zero_point};
    copy4(x_shape, "x_shape", p.x.shape);
    copy4(x_strides, "x_strides", p.x.strides);
    copy4(w_shape, "w_shape", p.w.shape);
    copy4(w_strides, "w_strides", p.w.strides);
    copy4(stride, "stride", p.stride, 2);
    copy4(padding, "padding", p.padding, 2);
    copy4(dilation, "dilation", p.dilation, 2);
    return p;
}

}  // namespace approxmul

extern "C" {

const char *approxmul_status_string(approxmul_status status) {
    switch (enum_bits(status)) {
    case APPROXMUL_OK: return "ok";
    case APPROXMUL_ERR_INVALID_ARGUMENT: return "invalid argument";
    case APPROXMUL_ERR_NULL_POINTER: return "NULL pointer";
    case APPROXMUL_ERR_DTYPE: return "unsupported element type";
    case APPROXMUL_ERR_SHAPE: return "bad shape";
    case APPROXMUL_ERR_OVERFLOW: return "overflow";
    case APPROXMUL_ERR_OUT_OF_RANGE: return "operand out of range";
    case APPROXMUL_ERR_ALIASING: return "output overlaps an input";
    case APPROXMUL_ERR_OUT_OF_MEMORY: return "out of memory";
    case APPROXMUL_ERR_UNSUPPORTED: return "unsupported";
    case APPROXMUL_ERR_IO: return "I/O error";
    case APPROXMUL_ERR_FORMAT: return "malformed content";
    case APPROXMUL_ERR_CALLBACK: return "user function failed";
    case APPROXMUL_ERR_CANCELLED: return "cancelled";
    case APPROXMUL_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *approxmul_last_error(void) { return last_error_message().c_str(); }

const char *approxmul_version_string(void) { return APPROXMUL_VERSION; }

int approxmul_abi_version(void) { return APPROXMUL_ABI_VERSION; }

approxmul_status approxmul_set_num_threads(int num_threads) {
    static_assert(APPROXMUL_MAX_THREADS == kMaxThreads, "the header states the limit");
    return guarded([&] { set_num_threads(num_threads); });
}

int approxmul_get_num_threads(void) { return num_threads(); }

void approxmul_cancel(void) { request_cancel(); }

int approxmul_get_num_threads_setting(void) { return num_threads_setting(); }

approxmul_status approxmul_release_threads(void) { return guarded([] { release_threads(); }); }

const char *approxmul_build_info(void) {
    static const std::string info = std::string("version=") + APPROXMUL_VERSION +
                                    "\nabi=" + std::to_string(APPROXMUL_ABI_VERSION) +
#ifdef APPROXMUL_OPENMP
                                    "\nopenmp=yes" +
#else
                                    "\nopenmp=no" +
#endif
                                    "\nopenmp_runtime=" + openmp_runtime() +
                                    "\n" + kernels::dispatch_info();
    return info.c_str();
}

approxmul_status approxmul_multiplier_from_table(const int32_t *table, int64_t table_len,
                                                 int bits, int is_signed,
                                                 approxmul_multiplier **out) {
    return guarded([&] {
        require_pointer(out, "out");
        require_pointer(table, "table");
        check_width(bits, kMaxTableBits);
        if (table_len != (int64_t{1} << (2 * bits)))
            fail(APPROXMUL_ERR_SHAPE, "table_len: %lld entries, a %d-bit table has %lld",
                 static_cast<long long>(table_len), bits,
                 static_cast<long long>(int64_t{1} << (2 * bits)));
        hand_out(Multiplier::from_table(std::vector<int32_t>(table, table + table_len), bits,
                                        is_signed != 0, "table"),
                 out);
    });
}

approxmul_status approxmul_multiplier_exact(int bits, int is_signed, approxmul_multiplier **out) {
    return guarded([&] {
        require_pointer(out, "out");
        // the same canonical spec as "exact:bits=..,signed=.." gives
        hand_out(Multiplier::with_spec(Multiplier::exact(bits, is_signed != 0),
                                       "exact:bits=" + std::to_string(bits) +
                                           ",signed=" + std::to_string(is_signed != 0)),
                 out);
    });
}

void approxmul_multiplier_destroy(approxmul_multiplier *m) { delete m; }

approxmul_status approxmul_multiplier_bits(const approxmul_multiplier *m, int *out) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(out, "out");
        *out = impl.bits();
    });
}

approxmul_status approxmul_multiplier_is_signed(const approxmul_multiplier *m, int *out) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(out, "out");
        *out = impl.is_signed() ? 1 : 0;
    });
}

approxmul_status approxmul_multiplier_name(const approxmul_multiplier *m, const char **out) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(out, "out");
        *out = impl.name().c_str();
    });
}

approxmul_status approxmul_multiplier_plan(const approxmul_multiplier *m, const char **out) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(out, "out");
        *out = plan_name(impl.plan());
    });
}

approxmul_status approxmul_multiplier_table(const approxmul_multiplier *m, int32_t *out,
                                            int64_t out_len) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(out, "out");
        if (impl.bits() > kMaxTableBits)
            fail(APPROXMUL_ERR_UNSUPPORTED, "a %d-bit multiplier has no table (at most %d bits: "
                 "4^%d entries)", impl.bits(), kMaxTableBits, kMaxTableBits);
        const int64_t entries = int64_t{1} << (2 * impl.bits());
        if (out_len != entries)
            fail(APPROXMUL_ERR_SHAPE, "out_len: %lld entries, the table has %lld",
                 static_cast<long long>(out_len), static_cast<long long>(entries));
        if (impl.has_table()) {
            std::memcpy(out, impl.table().data(), static_cast<size_t>(entries) * sizeof(int32_t));
        } else {  // tabulated aside: a failing model function must leave out untouched
            std::vector<int32_t> table(static_cast<size_t>(entries));
            library::product_table(impl, table.data());
            std::memcpy(out, table.data(), table.size() * sizeof(int32_t));
        }
    });
}

approxmul_status approxmul_multiplier_product(const approxmul_multiplier *m, int64_t a,
                                              int64_t b, int64_t *out) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(out, "out");
        check_zero_point(a, "a", impl);  // same range rule as any code
        check_zero_point(b, "b", impl);
        *out = impl.product(a, b);
    });
}

approxmul_status approxmul_multiplier_product_range(const approxmul_multiplier *m,
                                                    int64_t *min_out, int64_t *max_out) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(min_out, "min_out");
        require_pointer(max_out, "max_out");
        *min_out = impl.min_product();
        *max_out = impl.max_product();
    });
}

approxmul_status approxmul_accumulator_dtype(const approxmul_multiplier *m, int64_t inner,
                                             int64_t a_zero_point, int64_t b_zero_point,
                                             approxmul_dtype *out) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(out, "out");
        *out = accumulator_dtype(impl, inner, a_zero_point, b_zero_point);
    });
}

approxmul_status approxmul_matmul(const approxmul_multiplier *m, int64_t rows, int64_t cols,
                                  int64_t inner, approxmul_dtype a_dtype, const void *a,
                                  int64_t a_row_stride, int64_t a_col_stride,
                                  approxmul_dtype b_dtype, const void *b, int64_t b_row_stride,
                                  int64_t b_col_stride, int64_t a_zero_point,
                                  int64_t b_zero_point, approxmul_dtype c_dtype, void *c,
                                  int64_t c_row_stride, int64_t c_col_stride) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        check_sizes(rows, cols, inner);
        const MatrixView av{"a", dtype_argument(a_dtype, "a"), a, rows, inner,
                            a_row_stride, a_col_stride};
        const MatrixView bv{"b", dtype_argument(b_dtype, "b"), b, inner, cols,
                            b_row_stride, b_col_stride};
        const MatrixView cv{"c", dtype_argument(c_dtype, "c"), c, rows, cols,
                            c_row_stride, c_col_stride};
        check_operation(impl, av, bv, cv, inner, a_zero_point, b_zero_point);
        if (rows == 0 || cols == 0) return;
        kernels::matmul({&impl, rows, cols, inner, av, bv, cv, a_zero_point, b_zero_point});
    });
}

approxmul_status approxmul_bmm(const approxmul_multiplier *m, int64_t batch, int64_t rows,
                               int64_t cols, int64_t inner, approxmul_dtype a_dtype, const void *a,
                               int64_t a_batch_stride, int64_t a_row_stride, int64_t a_col_stride,
                               approxmul_dtype b_dtype, const void *b, int64_t b_batch_stride,
                               int64_t b_row_stride, int64_t b_col_stride, int64_t a_zero_point,
                               int64_t b_zero_point, approxmul_dtype c_dtype, void *c,
                               int64_t c_batch_stride, int64_t c_row_stride,
                               int64_t c_col_stride) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        if (batch < 0)
            fail(APPROXMUL_ERR_SHAPE, "batch: %lld is negative", static_cast<long long>(batch));
        check_sizes(rows, cols, inner);
        checked_mul(checked_mul(batch, rows, "batch*rows"), checked_mul(cols, std::max<int64_t>(inner, 1), "cols*inner"),
                    "batch*rows*cols*inner");
        const approxmul_dtype at_dtype = dtype_argument(a_dtype, "a");
        const approxmul_dtype bt_dtype = dtype_argument(b_dtype, "b");
        const approxmul_dtype ct_dtype = dtype_argument(c_dtype, "c");
        const TensorView at{"a", at_dtype, a, 3, {batch, rows, inner, 1},
                            {a_batch_stride, a_row_stride, a_col_stride, 0}};
        const TensorView bt{"b", bt_dtype, b, 3, {batch, inner, cols, 1},
                            {b_batch_stride, b_row_stride, b_col_stride, 0}};
        const TensorView ct{"c", ct_dtype, c, 3, {batch, rows, cols, 1},
                            {c_batch_stride, c_row_stride, c_col_stride, 0}};
        check_tensor_operand(at, impl);
        check_tensor_operand(bt, impl);
        check_output_type("c", ct_dtype, impl, inner, a_zero_point, b_zero_point);
        check_tensor_output(ct, at, bt);
        if (batch == 0 || rows == 0 || cols == 0) return;
        const MatrixView av{"a", at_dtype, a, rows, inner, a_row_stride, a_col_stride};
        const MatrixView bv{"b", bt_dtype, b, inner, cols, b_row_stride, b_col_stride};
        const MatrixView cv{"c", ct_dtype, c, rows, cols, c_row_stride, c_col_stride};
        kernels::bmm({{&impl, rows, cols, inner, av, bv, cv, a_zero_point, b_zero_point, 0},
                      batch, a_batch_stride, b_batch_stride, c_batch_stride});
    });
}

approxmul_status approxmul_conv2d(const approxmul_multiplier *m, approxmul_dtype x_dtype,
                                  const void *x, const int64_t *x_shape, const int64_t *x_strides,
                                  approxmul_dtype w_dtype, const void *w, const int64_t *w_shape,
                                  const int64_t *w_strides, const int64_t *stride,
                                  const int64_t *padding, const int64_t *dilation, int64_t groups,
                                  int64_t x_zero_point, int64_t w_zero_point,
                                  approxmul_dtype out_dtype, void *out, const int64_t *out_shape,
                                  const int64_t *out_strides) {
    return guarded([&] {
        kernels::Conv2dProblem p = conv2d_arguments(m, x_dtype, x, x_shape, x_strides, w_dtype, w,
                                                    w_shape, w_strides, stride, padding, dilation,
                                                    groups, x_zero_point, w_zero_point);
        p.out = {"out", dtype_argument(out_dtype, "out"), out, 4, {}, {}};
        copy4(out_shape, "out_shape", p.out.shape);
        copy4(out_strides, "out_strides", p.out.strides);
        kernels::check(p);
        kernels::conv2d(p);
    });
}

approxmul_status approxmul_conv2d_output_shape(const approxmul_multiplier *m,
                                               const int64_t *x_shape, const int64_t *w_shape,
                                               const int64_t *stride, const int64_t *padding,
                                               const int64_t *dilation, int64_t groups,
                                               int64_t x_zero_point, int64_t w_zero_point,
                                               int64_t *out_shape, approxmul_dtype *out_dtype) {
    return guarded([&] {
        // the problem approxmul_conv2d would build, without data or output
        kernels::Conv2dProblem p{m != nullptr ? &get(m) : nullptr, {"x", APPROXMUL_UINT8, nullptr, 4, {}, {}},
                                 {"w", APPROXMUL_UINT8, nullptr, 4, {}, {}},
                                 {"out", APPROXMUL_INT64, nullptr, 4, {}, {}},
                                 {}, {}, {}, groups, x_zero_point, w_zero_point};
        copy4(x_shape, "x_shape", p.x.shape);
        copy4(w_shape, "w_shape", p.w.shape);
        copy4(stride, "stride", p.stride, 2);
        copy4(padding, "padding", p.padding, 2);
        copy4(dilation, "dilation", p.dilation, 2);
        require_pointer(out_shape, "out_shape");
        if (m != nullptr) require_pointer(out_dtype, "out_dtype");
        const kernels::Shape4 shape = kernels::checked_output_shape(p);
        if (m != nullptr)  // the inner size was checked for overflow above
            *out_dtype = accumulator_dtype(*p.multiplier, p.w.shape[1] * p.w.shape[2] * p.w.shape[3],
                                           x_zero_point, w_zero_point);
        std::copy(shape.begin(), shape.end(), out_shape);
    });
}

approxmul_status approxmul_multiply(const approxmul_multiplier *m, int64_t rows, int64_t cols,
                                    approxmul_dtype a_dtype, const void *a, int64_t a_row_stride,
                                    int64_t a_col_stride, approxmul_dtype b_dtype, const void *b,
                                    int64_t b_row_stride, int64_t b_col_stride,
                                    approxmul_dtype c_dtype, void *c, int64_t c_row_stride,
                                    int64_t c_col_stride) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        check_sizes(rows, cols, 1);
        const MatrixView av{"a", dtype_argument(a_dtype, "a"), a, rows, cols,
                            a_row_stride, a_col_stride};
        const MatrixView bv{"b", dtype_argument(b_dtype, "b"), b, rows, cols,
                            b_row_stride, b_col_stride};
        const MatrixView cv{"c", dtype_argument(c_dtype, "c"), c, rows, cols,
                            c_row_stride, c_col_stride};
        check_operation(impl, av, bv, cv, 1, 0, 0);
        if (rows == 0 || cols == 0) return;
        kernels::multiply(impl, av, bv, cv);
    });
}

// ------------------------------------------------------- multiplier library

approxmul_status approxmul_multiplier_from_spec(const char *spec, approxmul_multiplier **out) {
    return guarded([&] {
        require_pointer(out, "out");
        require_pointer(spec, "spec");
        hand_out(library::from_spec(spec), out);
    });
}

approxmul_status approxmul_multiplier_spec(const approxmul_multiplier *m, const char **out) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(out, "out");
        *out = impl.spec().c_str();
    });
}

int approxmul_family_count(void) { return static_cast<int>(library::family_infos().size()); }

approxmul_status approxmul_family_info(int index, const char **name, const char **parameters,
                                       const char **description) {
    return guarded([&] {
        const auto &infos = library::family_infos();
        if (index < 0 || index >= static_cast<int>(infos.size()))
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "index: %d is outside 0..%d", index,
                 static_cast<int>(infos.size()) - 1);
        require_pointer(name, "name");
        require_pointer(parameters, "parameters");
        require_pointer(description, "description");
        *name = infos[size_t(index)].name.c_str();
        *parameters = infos[size_t(index)].parameters.c_str();
        *description = infos[size_t(index)].description.c_str();
    });
}

approxmul_status approxmul_table_parse(const void *data, int64_t size,
                                       approxmul_table_format format, int bits, int is_signed,
                                       approxmul_table_order order, int32_t *out,
                                       int64_t out_len, int *bits_out) {
    return guarded([&] {
        if (size != 0) require_pointer(data, "data");
        require_pointer(out, "out");
        require_pointer(bits_out, "bits_out");
        if (size < 0) fail(APPROXMUL_ERR_SHAPE, "size: %lld is negative", static_cast<long long>(size));
        int width = bits;
        auto table = library::parse_table(static_cast<const unsigned char *>(data), size_t(size),
                                          enum_bits(format), width, is_signed != 0,
                                          enum_bits(order));
        if (out_len < static_cast<int64_t>(table.size()))
            fail(APPROXMUL_ERR_SHAPE, "out_len: %lld entries, the %d-bit table has %zu",
                 static_cast<long long>(out_len), width, table.size());
        std::memcpy(out, table.data(), table.size() * sizeof(int32_t));
        *bits_out = width;
    });
}

approxmul_status approxmul_multiplier_from_c_function(approxmul_function function,
                                                      approxmul_signature signature, int bits,
                                                      int is_signed, const char *name,
                                                      approxmul_multiplier **out) {
    return guarded([&] {
        require_pointer(out, "out");
        hand_out(library::from_c_function(function, enum_bits(signature), bits, is_signed != 0,
                                          name ? name : "c-function"),
                 out);
    });
}

approxmul_status approxmul_multiplier_from_callback(approxmul_product_callback callback,
                                                    void *user_data, int bits, int is_signed,
                                                    approxmul_multiplier **out) {
    return guarded([&] {
        require_pointer(out, "out");
        hand_out(library::from_callback(callback, user_data, bits, is_signed != 0), out);
    });
}

approxmul_status approxmul_multiplier_metrics(const approxmul_multiplier *m,
                                              approxmul_metrics *out) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(out, "out");
        *out = library::metrics(impl);
    });
}

approxmul_status approxmul_multiplier_error_map(const approxmul_multiplier *m, int64_t *out,
                                                int64_t out_len) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        require_pointer(out, "out");
        if (impl.bits() > 12)
            fail(APPROXMUL_ERR_UNSUPPORTED, "an error map has 4^bits entries: at most 12 bits, "
                 "this multiplier has %d", impl.bits());
        const int64_t entries = int64_t{1} << (2 * impl.bits());
        if (out_len != entries)
            fail(APPROXMUL_ERR_SHAPE, "out_len: %lld entries, the error map has %lld",
                 static_cast<long long>(out_len), static_cast<long long>(entries));
        // computed aside: a failing model function must leave out untouched
        std::vector<int64_t> map(static_cast<size_t>(entries));
        library::error_map(impl, map.data());
        std::memcpy(out, map.data(), map.size() * sizeof(int64_t));
    });
}

// ------------------------------------------------------- gate-level netlists

approxmul_status approxmul_netlist_parse(const void *text, int64_t size, const char *module,
                                         const char *a, const char *b, const char *out_port,
                                         const void *cell_map, int64_t cell_map_size,
                                         approxmul_netlist **out) {
    return guarded([&] {
        require_pointer(out, "out");
        if (size != 0) require_pointer(text, "text");
        if (size < 0) fail(APPROXMUL_ERR_SHAPE, "size: %lld is negative", static_cast<long long>(size));
        if (cell_map_size < 0)
            fail(APPROXMUL_ERR_SHAPE, "cell_map_size: %lld is negative",
                 static_cast<long long>(cell_map_size));
        if (cell_map == nullptr && cell_map_size != 0)
            fail(APPROXMUL_ERR_NULL_POINTER, "cell_map: NULL pointer with %lld bytes",
                 static_cast<long long>(cell_map_size));
        netlist::Ports ports;
        if (module) ports.module = module;
        if (a) ports.a = a;
        if (b) ports.b = b;
        if (out_port) ports.out = out_port;
        static const unsigned char empty = 0;
        auto parsed = netlist::parse(size ? static_cast<const unsigned char *>(text) : &empty,
                                     size_t(size), ports,
                                     static_cast<const unsigned char *>(cell_map),
                                     size_t(cell_map_size));
        *out = new approxmul_netlist{std::move(parsed)};
    });
}

void approxmul_netlist_destroy(approxmul_netlist *netlist) { delete netlist; }

approxmul_status approxmul_netlist_info(const approxmul_netlist *netlist, const char **out) {
    return guarded([&] {
        require_pointer(netlist, "netlist");
        require_pointer(out, "out");
        *out = netlist->impl->info.c_str();
    });
}

approxmul_status approxmul_multiplier_from_netlist(const approxmul_netlist *netlist,
                                                   int is_signed, approxmul_multiplier **out) {
    return guarded([&] {
        require_pointer(netlist, "netlist");
        require_pointer(out, "out");
        hand_out(netlist::to_multiplier(netlist->impl, is_signed != 0), out);
    });
}

approxmul_status approxmul_family_verilog(const char *spec, char *out, int64_t out_len,
                                          int64_t *length_out) {
    return guarded([&] {
        require_pointer(spec, "spec");
        require_pointer(length_out, "length_out");
        if (out == nullptr && out_len != 0)
            fail(APPROXMUL_ERR_NULL_POINTER, "out: NULL pointer with out_len %lld",
                 static_cast<long long>(out_len));
        const std::string text = netlist::write_family(spec);
        const int64_t length = static_cast<int64_t>(text.size()) + 1;
        if (out != nullptr) {
            if (out_len < length)
                fail(APPROXMUL_ERR_SHAPE, "out_len: %lld bytes, the netlist needs %lld",
                     static_cast<long long>(out_len), static_cast<long long>(length));
            std::memcpy(out, text.c_str(), size_t(length));
        }
        *length_out = length;
    });
}

// ---- multiplier gradients

namespace {
// By reference and through enum_bits: a caller's out-of-range value (7) must
// not be loaded as the enum type, which is undefined behaviour in C++.
bool gradient_operand(const approxmul_operand &operand) {
    const int code = enum_bits(operand);
    if (code != APPROXMUL_OPERAND_A && code != APPROXMUL_OPERAND_B)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "operand: %d is neither APPROXMUL_OPERAND_A (0) nor "
             "APPROXMUL_OPERAND_B (1)", code);
    return code == APPROXMUL_OPERAND_B;
}

void gradient_entries(const Multiplier &impl, const double *out, int64_t out_len, int exponent) {
    require_pointer(out, "out");
    if (impl.bits() > 12)
        fail(APPROXMUL_ERR_UNSUPPORTED, "gradients tabulate every operand value: at most 12 bits, "
             "this multiplier has %d", impl.bits());
    const int64_t entries = int64_t{1} << (exponent * impl.bits());
    if (out_len != entries)
        fail(APPROXMUL_ERR_SHAPE, "out_len: %lld entries, the gradient has %lld",
             static_cast<long long>(out_len), static_cast<long long>(entries));
}
}  // namespace

approxmul_status approxmul_multiplier_gradient_table(const approxmul_multiplier *m,
                                                     approxmul_operand operand, int half_window,
                                                     double *out, int64_t out_len) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        const bool along_b = gradient_operand(operand);
        if (half_window < 1)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "half_window: %d, must be at least 1", half_window);
        gradient_entries(impl, out, out_len, 2);
        std::vector<double> table(static_cast<size_t>(out_len));  // out untouched on failure
        library::gradient_table(impl, along_b, half_window, table.data());
        std::memcpy(out, table.data(), table.size() * sizeof(double));
    });
}

approxmul_status approxmul_multiplier_gradient_slopes(const approxmul_multiplier *m,
                                                      approxmul_operand operand, double *out,
                                                      int64_t out_len) {
    return guarded([&] {
        const Multiplier &impl = get(m);
        const bool along_b = gradient_operand(operand);
        gradient_entries(impl, out, out_len, 1);
        std::vector<double> slopes(static_cast<size_t>(out_len));
        library::gradient_slopes(impl, along_b, slopes.data());
        std::memcpy(out, slopes.data(), slopes.size() * sizeof(double));
    });
}

}  // extern "C"
