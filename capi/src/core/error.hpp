// Errors inside the C++ core are exceptions carrying an approxmul_status;
// the C ABI boundary (capi.cpp) is the only place that turns them into
// return codes, so no exception ever crosses into a C caller.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>

#include "approxmul.h"

namespace approxmul {

class Error : public std::runtime_error {
public:
    Error(approxmul_status status, const std::string &message)
        : std::runtime_error(message), status_(status) {}
    approxmul_status status() const noexcept { return status_; }

private:
    approxmul_status status_;
};

// printf-style message formatting; messages are short, so a fixed buffer is enough.
template <typename... Args>
[[noreturn]] void fail(approxmul_status status, const char *format, Args... args) {
    char buffer[512];
    std::snprintf(buffer, sizeof buffer, format, args...);
    throw Error(status, buffer);
}

[[noreturn]] inline void fail(approxmul_status status, const char *message) {
    throw Error(status, message);
}

inline void require_pointer(const void *pointer, const char *name) {
    if (pointer == nullptr) fail(APPROXMUL_ERR_NULL_POINTER, "%s: NULL pointer", name);
}

}  // namespace approxmul
