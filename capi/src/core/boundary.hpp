// The exception-to-status boundary shared by every file of the C ABI
// (capi*.cpp): each exported function runs its body through guarded(),
// which clears the thread's error message, catches every exception and
// turns it into a status code and message. Nothing else may catch broadly.
#pragma once

#include <cstring>
#include <new>
#include <string>

#include "approxmul.h"
#include "error.hpp"
#include "threads.hpp"

namespace approxmul {

// C callers may pass any int where the header names an enum type. In C++,
// loading a value outside an enum's range is undefined behaviour, so enum
// arguments are read as the int they are, then validated.
template <typename Enum>
int enum_bits(const Enum &raw) {
    static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized");
    int value;
    std::memcpy(&value, &raw, sizeof value);
    return value;
}

// An approxmul_dtype argument, validated.
inline approxmul_dtype dtype_argument(const approxmul_dtype &raw, const char *name) {
    const int code = enum_bits(raw);
    if (code < APPROXMUL_INT8 || code > APPROXMUL_INT64)
        fail(APPROXMUL_ERR_DTYPE, "%s: %d is not an approxmul_dtype value", name, code);
    return static_cast<approxmul_dtype>(code);
}

// The calling thread's message for approxmul_last_error().
std::string &last_error_message();

template <typename Body>
approxmul_status guarded(Body &&body) noexcept {
    std::string &message = last_error_message();
    try {
        message.clear();
        mark_call_start();  // approxmul_cancel() stops calls in progress, not later ones
        body();
        return APPROXMUL_OK;
    } catch (const Error &e) {
        message = e.what();
        return e.status();
    } catch (const std::bad_alloc &) {
        message = "out of memory";
        return APPROXMUL_ERR_OUT_OF_MEMORY;
    } catch (const std::exception &e) {
        message = std::string("internal error: ") + e.what();
        return APPROXMUL_ERR_INTERNAL;
    } catch (...) {
        message = "internal error: unknown exception";
        return APPROXMUL_ERR_INTERNAL;
    }
}

}  // namespace approxmul
