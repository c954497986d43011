// The one place that decides how many threads approxmul's parallel regions
// use, and how a long call learns that it was asked to stop. The thread
// count is approxmul's own setting: the caller's OpenMP state is never
// changed (no omp_set_num_threads), so embedding applications keep theirs.
#pragma once

#include <cstdint>
#include <string>

namespace approxmul {

// More threads than this is a mistake (a typo, a count of operations):
// OpenMP runtimes abort the process when they cannot create them.
constexpr int kMaxThreads = 1024;

void set_num_threads(int num_threads);  // 0: one per available core; 0..kMaxThreads
int num_threads();                      // the count a parallel region should use, 1..kMaxThreads
int num_threads_setting();              // the last set_num_threads value (0: none)
void release_threads();                 // ends the calling thread's team; throws Error

// Cancellation (approxmul_cancel): a process-wide counter that each cancel
// request increments. A call remembers the value it saw when it entered the
// ABI (mark_call_start, from guarded()); its long loops poll cancelled(),
// which is true once the counter moved since. Calls started later are
// unaffected. Lock-free, so approxmul_cancel is async-signal safe.
void request_cancel();
void mark_call_start();              // on the calling thread
std::uint64_t call_start_epoch();    // the calling thread's mark, to hand to workers
void adopt_call_epoch(std::uint64_t epoch);  // a worker takes the call's mark (nested loops)
bool cancelled(std::uint64_t start_epoch);
[[noreturn]] void fail_cancelled();  // throws the APPROXMUL_ERR_CANCELLED error

// The file of the OpenMP runtime this library's parallel regions run on
// ("none" without OpenMP, "unknown" where the loader cannot say). A wheel
// vendors its own runtime; this shows which copy a process really uses.
std::string openmp_runtime();

}  // namespace approxmul
