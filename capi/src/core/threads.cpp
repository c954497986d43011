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
    // soft pause: the runtime keeps its settings and stops its threads
    // (libgomp joins the calling thread's pool, LLVM's libomp puts its
    // threads to sleep); the next region starts them again. The result is
    // not checked: libomp refuses a pause while already paused, which is
    // the state this call asks for.
    omp_pause_resource_all(omp_pause_soft);
#elif defined(APPROXMUL_OPENMP)
    fail(APPROXMUL_ERR_UNSUPPORTED,
         "approxmul_release_threads: this build's OpenMP runtime has no omp_pause_resource_all");
#endif
}

}  // namespace approxmul
