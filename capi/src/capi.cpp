// The C ABI boundary: every exported function is here, noexcept, and runs
// its body through guarded(), the one place where C++ exceptions become
// status codes and the calling thread's error message.
#include <cstring>
#include <new>
#include <string>

#include "approxmul.h"
#include "core/error.hpp"
#include "core/multiplier.hpp"
#include "core/operands.hpp"
#include "core/threads.hpp"
#include "kernels/kernels.hpp"

#ifndef APPROXMUL_VERSION
#error "APPROXMUL_VERSION must be defined by the build"
#endif

struct approxmul_multiplier {
    std::shared_ptr<const approxmul::Multiplier> impl;
};

namespace {

using namespace approxmul;

thread_local std::string last_error_message;

template <typename Body>
approxmul_status guarded(Body &&body) noexcept {
    try {
        last_error_message.clear();
        body();
        return APPROXMUL_OK;
    } catch (const Error &e) {
        last_error_message = e.what();
        return e.status();
    } catch (const std::bad_alloc &) {
        last_error_message = "out of memory";
        return APPROXMUL_ERR_OUT_OF_MEMORY;
    } catch (const std::exception &e) {
        last_error_message = std::string("internal error: ") + e.what();
        return APPROXMUL_ERR_INTERNAL;
    } catch (...) {
        last_error_message = "internal error: unknown exception";
        return APPROXMUL_ERR_INTERNAL;
    }
}

const Multiplier &get(const approxmul_multiplier *m) {
    require_pointer(m, "multiplier");
    return *m->impl;
}

void hand_out(std::shared_ptr<const Multiplier> impl, approxmul_multiplier **out) {
    *out = new approxmul_multiplier{std::move(impl)};
}

// C callers may pass any int where the header says approxmul_dtype or
// approxmul_status. In C++, loading a value outside an enum's range is
// undefined behaviour, so enum arguments are read as the int they are.
template <typename Enum>
int enum_bits(const Enum &raw) {
    static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized");
    int value;
    std::memcpy(&value, &raw, sizeof value);
    return value;
}

approxmul_dtype dtype_argument(const approxmul_dtype &raw, const char *name) {
    const int code = enum_bits(raw);
    if (code < APPROXMUL_INT8 || code > APPROXMUL_INT64)
        fail(APPROXMUL_ERR_DTYPE, "%s: %d is not an approxmul_dtype value", name, code);
    return static_cast<approxmul_dtype>(code);
}

// Validates a, b and c of an operation before anything is computed.
void check_operation(const Multiplier &m, const MatrixView &a, const MatrixView &b,
                     const MatrixView &c, int64_t inner, int64_t a_zero, int64_t b_zero) {
    check_operand(a, m);
    check_operand(b, m);
    const approxmul_dtype needed = accumulator_dtype(m, inner, a_zero, b_zero);
    if (c.dtype == APPROXMUL_INT32 && needed == APPROXMUL_INT64)
        fail(APPROXMUL_ERR_OVERFLOW,
             "c: int32 can overflow summing %lld products of up to %lld in magnitude "
             "(with the zero points); use an int64 output",
             static_cast<long long>(inner), static_cast<long long>(m.max_abs_product()));
    check_output(c, a, b);
}

}  // namespace

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
    case APPROXMUL_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *approxmul_last_error(void) { return last_error_message.c_str(); }

const char *approxmul_version_string(void) { return APPROXMUL_VERSION; }

int approxmul_abi_version(void) { return APPROXMUL_ABI_VERSION; }

approxmul_status approxmul_set_num_threads(int num_threads) {
    return guarded([&] {
        if (num_threads < 0)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "num_threads: %d is negative", num_threads);
        set_num_threads(num_threads);
    });
}

int approxmul_get_num_threads(void) { return num_threads(); }

const char *approxmul_build_info(void) {
    static const std::string info = std::string("version=") + APPROXMUL_VERSION +
                                    "\nabi=" + std::to_string(APPROXMUL_ABI_VERSION) +
#ifdef APPROXMUL_OPENMP
                                    "\nopenmp=yes" +
#else
                                    "\nopenmp=no" +
#endif
                                    "\nisa=" + kernels::active_isa() + "\n";
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
        hand_out(Multiplier::exact(bits, is_signed != 0), out);
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
        if (!impl.has_table())
            fail(APPROXMUL_ERR_UNSUPPORTED, "a %d-bit multiplier has no table (at most %d bits)",
                 impl.bits(), kMaxTableBits);
        const auto &table = impl.table();
        if (out_len != static_cast<int64_t>(table.size()))
            fail(APPROXMUL_ERR_SHAPE, "out_len: %lld entries, the table has %zu",
                 static_cast<long long>(out_len), table.size());
        std::memcpy(out, table.data(), table.size() * sizeof(int32_t));
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

}  // extern "C"
