#include "threads.hpp"

#include <algorithm>
#include <atomic>

#include "error.hpp"

#ifdef APPROXMUL_OPENMP
#include <omp.h>
#endif

namespace approxmul {

namespace {
std::atomic<int> requested_threads{0};
std::atomic<std::uint64_t> cancel_epoch{0};
thread_local std::uint64_t call_epoch = 0;
}  // namespace

void set_num_threads(int num_threads) {
    if (num_threads < 0)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "num_threads: %d is negative (0 means one per core)",
             num_threads);
    if (num_threads > kMaxThreads)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT,
             "num_threads: %d is more than the %d threads approxmul allows "
             "(0 means one per core)", num_threads, kMaxThreads);
    requested_threads.store(num_threads);
}

int num_threads() {
#ifdef APPROXMUL_OPENMP
    const int requested = requested_threads.load();
    // OMP_NUM_THREADS may ask for absurd counts too: the same cap applies
    return std::clamp(requested > 0 ? requested : omp_get_max_threads(), 1, kMaxThreads);
#else
    return 1;
#endif
}

void request_cancel() { cancel_epoch.fetch_add(1, std::memory_order_relaxed); }

void mark_call_start() { call_epoch = cancel_epoch.load(std::memory_order_relaxed); }

std::uint64_t call_start_epoch() { return call_epoch; }

void adopt_call_epoch(std::uint64_t epoch) { call_epoch = epoch; }

bool cancelled(std::uint64_t start_epoch) {
    return cancel_epoch.load(std::memory_order_relaxed) != start_epoch;
}

void fail_cancelled() {
    fail(APPROXMUL_ERR_CANCELLED, "cancelled by approxmul_cancel() before it finished");
}

}  // namespace approxmul
