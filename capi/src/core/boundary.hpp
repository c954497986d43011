// The exception-to-status boundary shared by every file of the C ABI
// (capi*.cpp): each exported function runs its body through guarded(),
// which clears the thread's error message, catches every exception and
// turns it into a status code and message. Nothing else may catch broadly.
#pragma once

#include <new>
#include <string>

#include "approxmul.h"
#include "error.hpp"

namespace approxmul {

// The calling thread's message for approxmul_last_error().
std::string &last_error_message();

template <typename Body>
approxmul_status guarded(Body &&body) noexcept {
    std::string &message = last_error_message();
    try {
        message.clear();
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
