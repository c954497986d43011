// Parallel loops that never let an exception escape an OpenMP region
// (which would terminate the process): the first one is kept and rethrown
// on the calling thread once the loop has finished. They are also where long
// work notices approxmul_cancel(): every index checks first, so a cancelled
// loop stops after the bodies already running and throws the cancel error.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <vector>

#include "../core/threads.hpp"

#ifdef APPROXMUL_OPENMP
#include <omp.h>
#endif

namespace approxmul::kernels {

// body(index, state) for index in [0, n), each thread with its own State,
// constructed on that thread before its first index and destroyed there
// after its last. A workspace made so takes its scratch from that thread's
// cache and gives it back there (core/scratch.hpp): the next call's same
// thread writes the same, still cached, lines. A workspace shared out by
// thread number from the calling thread moved its lines between cores on
// every call.
//
// Thread t first runs the indices of its own stretch, t * n / threads
// onwards, in order, then takes what is left of the others' stretches one
// index at a time. A balanced loop so gives every thread the same indices
// on every call (the same output blocks, still in its core's cache: a
// 2-thread 64x576x3136 byte GEMM took 0.79x the time it took with indices
// handed out in any order), and an unbalanced one, or one whose thread
// lost its core for a while, is still evened out.
template <typename State, typename Body>
void parallel_for_each(int64_t n, int threads, const Body &body) {
    std::exception_ptr error;
    std::mutex error_lock;
    const std::uint64_t epoch = call_start_epoch();  // the caller's, not the workers'
    std::atomic<bool> stop{false};
    auto keep_error = [&] {
        std::lock_guard<std::mutex> guard(error_lock);
        if (!error) error = std::current_exception();
        stop.store(true, std::memory_order_relaxed);  // the call fails anyway
    };
    threads = std::max(1, threads);
    struct alignas(64) Stretch {  // a line each: the owner claims from it on every index
        std::atomic<int64_t> next;
        int64_t end;
    };
    std::vector<Stretch> stretches(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        stretches[static_cast<size_t>(t)].next.store(n * t / threads, std::memory_order_relaxed);
        stretches[static_cast<size_t>(t)].end = n * (t + 1) / threads;
    }
#pragma omp parallel num_threads(threads)
    {
#ifdef APPROXMUL_OPENMP
        const int own = omp_get_thread_num();  // a smaller team leaves stretches to take
#else
        const int own = 0;
#endif
        std::optional<State> state;
        try {
            state.emplace();
        } catch (...) {
            keep_error();
        }
        for (int k = 0; k < threads; ++k) {
            Stretch &from = stretches[static_cast<size_t>((own + k) % threads)];
            for (;;) {
                if (stop.load(std::memory_order_relaxed)) break;
                const int64_t index = from.next.fetch_add(1, std::memory_order_relaxed);
                if (index >= from.end) break;
                if (cancelled(epoch)) {
                    stop.store(true, std::memory_order_relaxed);
                    break;
                }
                try {
                    adopt_call_epoch(epoch);  // a parallel_for inside body polls for this call
                    body(index, *state);
                } catch (...) {
                    keep_error();
                }
            }
        }
    }
    if (error) std::rethrow_exception(error);
    if (stop.load()) fail_cancelled();
}

// The running thread's number in its team, as parallel_for passes it.
struct ThreadNumber {
#ifdef APPROXMUL_OPENMP
    int value = omp_get_thread_num();
#else
    int value = 0;
#endif
};

// body(index, thread) for index in [0, n), thread in [0, threads).
template <typename Body>
void parallel_for(int64_t n, int threads, const Body &body) {
    parallel_for_each<ThreadNumber>(n, threads,
                                    [&](int64_t index, ThreadNumber &t) { body(index, t.value); });
}

}  // namespace approxmul::kernels
