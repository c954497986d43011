#include "threads.hpp"

#include <atomic>

#include "error.hpp"

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

void release_threads() {
#if defined(APPROXMUL_OPENMP) && defined(APPROXMUL_HAVE_OMP_PAUSE)
    if (omp_in_parallel())
        fail(APPROXMUL_ERR_UNSUPPORTED, "approxmul_release_threads: called inside a parallel region");
    // soft pause: the runtime keeps its settings, ends its threads (libgomp
    // joins the calling thread's pool; the next region starts a new one)
    if (omp_pause_resource_all(omp_pause_soft) != 0)
        fail(APPROXMUL_ERR_UNSUPPORTED, "approxmul_release_threads: the OpenMP runtime refused to pause");
#elif defined(APPROXMUL_OPENMP)
    fail(APPROXMUL_ERR_UNSUPPORTED,
         "approxmul_release_threads: this build's OpenMP runtime has no omp_pause_resource_all");
#endif
}

}  // namespace approxmul
