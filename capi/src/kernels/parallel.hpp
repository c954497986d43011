// A parallel loop that never lets an exception escape an OpenMP region
// (which would terminate the process): the first one is kept and rethrown
// on the calling thread once the loop has finished.
#pragma once

#include <cstdint>
#include <exception>
#include <mutex>

#ifdef APPROXMUL_OPENMP
#include <omp.h>
#endif

namespace approxmul::kernels {

// body(index, thread) for index in [0, n), thread in [0, threads).
template <typename Body>
void parallel_for(int64_t n, int threads, const Body &body) {
    std::exception_ptr error;
    std::mutex error_lock;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
    for (int64_t index = 0; index < n; ++index) {
#ifdef APPROXMUL_OPENMP
        const int thread = omp_get_thread_num();
#else
        const int thread = 0;
#endif
        try {
            body(index, thread);
        } catch (...) {
            std::lock_guard<std::mutex> guard(error_lock);
            if (!error) error = std::current_exception();
        }
    }
    if (error) std::rethrow_exception(error);
}

}  // namespace approxmul::kernels
