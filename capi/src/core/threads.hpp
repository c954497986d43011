// The one place that decides how many threads approxmul's parallel regions
// use. It is approxmul's own setting: the caller's OpenMP state is never
// changed (no omp_set_num_threads), so embedding applications keep theirs.
#pragma once

namespace approxmul {

void set_num_threads(int num_threads);  // 0: one per available core
int num_threads();                      // the count a parallel region should use
int num_threads_setting();              // the last set_num_threads value (0: none)
void release_threads();                 // ends the calling thread's team; throws Error

}  // namespace approxmul
