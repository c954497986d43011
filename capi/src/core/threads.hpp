// The one place that decides how many threads approxmul's parallel regions
// use. It is approxmul's own setting: the caller's OpenMP state is never
// changed (no omp_set_num_threads), so embedding applications keep theirs.
#pragma once

#include <string>

namespace approxmul {

void set_num_threads(int num_threads);  // 0: one per available core
int num_threads();                      // the count a parallel region should use

// The file of the OpenMP runtime this library's parallel regions run on
// ("none" without OpenMP, "unknown" where the loader cannot say). A wheel
// vendors its own runtime; this shows which copy a process really uses.
std::string openmp_runtime();

}  // namespace approxmul
