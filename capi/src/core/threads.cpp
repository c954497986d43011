#include "threads.hpp"

#include <atomic>

#ifdef APPROXMUL_OPENMP
#include <omp.h>
#endif

namespace approxmul {

namespace {
std::atomic<int> requested_threads{0};
}

void set_num_threads(int num_threads) { requested_threads.store(num_threads); }

int num_threads_setting() { return requested_threads.load(); }

int num_threads() {
#ifdef APPROXMUL_OPENMP
    int requested = requested_threads.load();
    return requested > 0 ? requested : omp_get_max_threads();
#else
    return 1;
#endif
}

}  // namespace approxmul
