// A parallel loop that never lets an exception escape an OpenMP region
// (which would terminate the process): the first one is kept and rethrown
// on the calling thread once the loop has finished. It is also where long
// work notices approxmul_cancel(): every index checks first, so a cancelled
// loop stops after the bodies already running and throws the cancel error.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>

#include "../core/threads.hpp"

#ifdef APPROXMUL_OPENMP
#include <omp.h>
#endif

namespace approxmul::kernels {

// body(index, thread) for index in [0, n), thread in [0, threads).
template <typename Body>
void parallel_for(int64_t n, int threads, const Body &body) {
    std::exception_ptr error;
    std::mutex error_lock;
    const std::uint64_t epoch = call_start_epoch();  // the caller's, not the workers'
    std::atomic<bool> stop{false};
#pragma omp parallel for schedule(dynamic) num_threads(threads)
    for (int64_t index = 0; index < n; ++index) {
        if (stop.load(std::memory_order_relaxed)) continue;
        if (cancelled(epoch)) {
            stop.store(true, std::memory_order_relaxed);
            continue;
        }
#ifdef APPROXMUL_OPENMP
        const int thread = omp_get_thread_num();
#else
        const int thread = 0;
#endif
        try {
            adopt_call_epoch(epoch);  // a parallel_for inside body polls for this call
            body(index, thread);
        } catch (...) {
            std::lock_guard<std::mutex> guard(error_lock);
            if (!error) error = std::current_exception();
            stop.store(true, std::memory_order_relaxed);  // the call fails anyway
        }
    }
    if (error) std::rethrow_exception(error);
    if (stop.load()) fail_cancelled();
}

}  // namespace approxmul::kernels
