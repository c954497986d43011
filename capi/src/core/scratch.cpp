#include "scratch.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace approxmul {

namespace {

// What the cache may hold: enough for the scratch of the GEMMs and
// convolutions of a network layer; larger blocks go straight back to the
// heap (their calls compute long enough that the faults do not matter).
constexpr std::size_t kCachedBytes = std::size_t{64} << 20;
constexpr std::size_t kCachedBlocks = 16;
constexpr std::align_val_t kAlign{64};

// Address sanitizer builds do not cache: every block is a fresh allocation
// whose bounds and lifetime the sanitizer checks.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCaching = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCaching = false;
#else
constexpr bool kCaching = true;
#endif
#else
constexpr bool kCaching = true;
#endif

struct Cache {
    std::mutex lock;
    std::vector<std::pair<void *, std::size_t>> blocks;  // oldest first
    std::size_t bytes = 0;
};

Cache &cache() {
    static Cache *instance = new Cache;  // never destroyed: calls may run during exit
    return *instance;
}

void free_block(void *block) { ::operator delete(block, kAlign); }

// The smallest block of `blocks` that fits `bytes` and is at most twice
// it, taken out (its capacity in `capacity`), or null.
void *take_fitting(std::vector<std::pair<void *, std::size_t>> &blocks, std::size_t &held,
                   std::size_t bytes, std::size_t &capacity) {
    auto best = blocks.end();
    for (auto it = blocks.begin(); it != blocks.end(); ++it)
        if (it->second >= bytes && it->second <= 2 * bytes &&
            (best == blocks.end() || it->second < best->second))
            best = it;
    if (best == blocks.end()) return nullptr;
    void *block = best->first;
    capacity = best->second;
    held -= capacity;
    blocks.erase(best);
    return block;
}

// Into the shared cache, the oldest blocks freed beyond its bounds.
void to_shared(void *block, std::size_t capacity) {
    std::vector<void *> evicted;
    {
        Cache &c = cache();
        std::lock_guard<std::mutex> hold(c.lock);
        c.blocks.emplace_back(block, capacity);
        c.bytes += capacity;
        while (c.bytes > kCachedBytes || c.blocks.size() > kCachedBlocks) {
            evicted.push_back(c.blocks.front().first);
            c.bytes -= c.blocks.front().second;
            c.blocks.erase(c.blocks.begin());
        }
    }
    for (void *old : evicted) free_block(old);
}

// Each thread's own blocks, asked first: a worker that releases its
// workspace at the end of a call gets the same block back on the next,
// its lines still in that core's cache. Handed to whichever thread asked
// next (the shared cache alone did that), a workspace's lines moved from
// core to core on every call: on a 2-core Zen 4 a 2-thread byte GEMM of
// 64x576x3136 ran no faster than one thread (docs/benchmarks.md). The
// bounds are per thread and, for all threads together, kThreadsBytes.
constexpr std::size_t kThreadBytes = std::size_t{16} << 20;
constexpr std::size_t kThreadBlocks = 8;
constexpr std::size_t kThreadsBytes = std::size_t{256} << 20;
std::atomic<std::size_t> threads_bytes{0};

struct ThreadCache {
    std::vector<std::pair<void *, std::size_t>> blocks;  // oldest first
    std::size_t bytes = 0;
    ~ThreadCache() {  // the thread ends: its blocks serve the others
        threads_bytes.fetch_sub(bytes);
        for (const auto &b : blocks) to_shared(b.first, b.second);
    }
};

ThreadCache &thread_cache() {
    thread_local ThreadCache instance;
    return instance;
}

}  // namespace

void *scratch_acquire(std::size_t bytes, std::size_t &capacity) {
    bytes = std::max<std::size_t>((bytes + 63) / 64 * 64, 64);
    if (kCaching && bytes <= kCachedBytes) {
        ThreadCache &own = thread_cache();
        if (void *block = take_fitting(own.blocks, own.bytes, bytes, capacity)) {
            threads_bytes.fetch_sub(capacity);
            return block;
        }
        Cache &c = cache();
        std::lock_guard<std::mutex> hold(c.lock);
        if (void *block = take_fitting(c.blocks, c.bytes, bytes, capacity)) return block;
    }
    capacity = bytes;
    return ::operator new(bytes, kAlign);
}

void scratch_release(void *block, std::size_t capacity) {
    if (!kCaching || capacity > kCachedBytes) return free_block(block);
    if (capacity > kThreadBytes || threads_bytes.fetch_add(capacity) + capacity > kThreadsBytes) {
        if (capacity <= kThreadBytes) threads_bytes.fetch_sub(capacity);
        return to_shared(block, capacity);
    }
    ThreadCache &own = thread_cache();
    own.blocks.emplace_back(block, capacity);
    own.bytes += capacity;
    while (own.bytes > kThreadBytes || own.blocks.size() > kThreadBlocks) {
        const auto oldest = own.blocks.front();
        own.blocks.erase(own.blocks.begin());
        own.bytes -= oldest.second;
        threads_bytes.fetch_sub(oldest.second);
        to_shared(oldest.first, oldest.second);
    }
}

bool scratch_caches() { return kCaching; }

}  // namespace approxmul
