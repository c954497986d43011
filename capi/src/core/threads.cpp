#include "threads.hpp"

#include <algorithm>
#include <atomic>

#include "error.hpp"

#ifdef APPROXMUL_OPENMP
#include <omp.h>
#endif
#if defined(APPROXMUL_OPENMP) && defined(__linux__)
#include <link.h>  // dl_iterate_phdr: in libc since glibc 2.2.5, unlike dladdr's 2.34 home
#include <stdlib.h>  // realpath, free
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

int num_threads_setting() { return requested_threads.load(); }

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

#if defined(APPROXMUL_OPENMP) && defined(__linux__)
namespace {
struct ObjectSearch {
    ElfW(Addr) address;
    std::string path;
};

// dl_iterate_phdr callback: stops at the loaded object one of whose
// segments holds the address.
int find_object(struct dl_phdr_info *info, size_t, void *data) {
    auto *search = static_cast<ObjectSearch *>(data);
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &segment = info->dlpi_phdr[i];
        if (segment.p_type != PT_LOAD) continue;
        ElfW(Addr) start = info->dlpi_addr + segment.p_vaddr;
        if (search->address >= start && search->address < start + segment.p_memsz) {
            search->path = info->dlpi_name ? info->dlpi_name : "";
            return 1;
        }
    }
    return 0;
}
}  // namespace
#endif

std::string openmp_runtime() {
#if defined(APPROXMUL_OPENMP) && defined(__linux__)
    // In PIC code a function's address is the resolved one, so this finds
    // the runtime the dynamic loader bound omp_get_max_threads to.
    ObjectSearch search{reinterpret_cast<ElfW(Addr)>(&omp_get_max_threads), {}};
    if (!dl_iterate_phdr(find_object, &search) || search.path.empty()) return "unknown";
    // the loader's path may read ".../approxmul_cffi/../approxmul.libs/...": show it resolved
    if (char *resolved = realpath(search.path.c_str(), nullptr)) {
        search.path = resolved;
        free(resolved);
    }
    return search.path;
#elif defined(APPROXMUL_OPENMP)
    return "unknown";
#else
    return "none";
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
