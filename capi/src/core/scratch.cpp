#include "scratch.hpp"

#include <algorithm>
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

}  // namespace

void *scratch_acquire(std::size_t bytes, std::size_t &capacity) {
    bytes = std::max<std::size_t>((bytes + 63) / 64 * 64, 64);
    if (kCaching && bytes <= kCachedBytes) {
        Cache &c = cache();
        std::lock_guard<std::mutex> hold(c.lock);
        // the smallest block that fits, if it is not more than twice the size
        auto best = c.blocks.end();
        for (auto it = c.blocks.begin(); it != c.blocks.end(); ++it)
            if (it->second >= bytes && it->second <= 2 * bytes &&
                (best == c.blocks.end() || it->second < best->second))
                best = it;
        if (best != c.blocks.end()) {
            void *block = best->first;
            capacity = best->second;
            c.bytes -= capacity;
            c.blocks.erase(best);
            return block;
        }
    }
    capacity = bytes;
    return ::operator new(bytes, kAlign);
}

void scratch_release(void *block, std::size_t capacity) {
    if (!kCaching || capacity > kCachedBytes) return free_block(block);
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

bool scratch_caches() { return kCaching; }

}  // namespace approxmul
