// Internal check of the scratch cache (core/scratch.hpp): a released block
// serves the next request of a similar size, alignment holds, blocks more
// than twice a request are not handed out for it, and the cache stays
// within its bounds (oversized blocks are never cached). A thread's
// released blocks serve that thread first, and another thread only once
// it has ended. Sanitizer builds do not cache; there only the allocation
// checks apply.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "../src/core/scratch.hpp"
#include "check.h"

using namespace approxmul;

int main() {
    const bool kCaching = scratch_caches();
    const void *first;
    {
        Scratch<int64_t> a(100000);
        CHECK(a.size() == 100000);
        CHECK(reinterpret_cast<uintptr_t>(a.data()) % 64 == 0);
        std::memset(a.data(), 1, a.size() * sizeof(int64_t));  // the whole size is usable
        first = a.data();
    }
    {
        Scratch<int64_t> again(90000);  // similar size: the released block
        if (kCaching) CHECK(again.data() == first);
        Scratch<int64_t> other(100000);  // the block is taken: a new one
        CHECK(other.data() != again.data());
    }
    {
        Scratch<uint8_t> small(1000);  // both cached blocks exceed twice this
        CHECK(small.data() != first);
        Scratch<uint8_t> empty(0);  // a real block even for nothing
        CHECK(empty.data() != nullptr && empty.size() == 0);
    }
    {
        Scratch<int16_t> moved(5000);
        int16_t *data = moved.data();
        Scratch<int16_t> to(std::move(moved));
        CHECK(to.data() == data && to.size() == 5000);
        CHECK(moved.data() == nullptr && moved.size() == 0);  // NOLINT(bugprone-use-after-move)
        Scratch<int16_t> assigned;
        assigned = std::move(to);
        CHECK(assigned.data() == data);
    }
    {
        // larger than the cache holds: freed, never handed out again as such
        const void *huge;
        {
            Scratch<uint8_t> big(size_t{100} << 20);
            big[big.size() - 1] = 1;
            huge = big.data();
        }
        Scratch<uint8_t> next(size_t{100} << 20);
        CHECK(next.size() == size_t{100} << 20);
        (void)huge;  // the heap may return the same address; the cache must not matter here
    }
    {
        // many blocks released: later requests still work and get distinct blocks
        std::vector<Scratch<int32_t>> blocks;
        for (int i = 0; i < 40; ++i) blocks.emplace_back(size_t(1000 + 100 * i));
        for (size_t i = 1; i < blocks.size(); ++i) CHECK(blocks[i].data() != blocks[i - 1].data());
        blocks.clear();
        std::vector<Scratch<int32_t>> again;
        for (int i = 0; i < 40; ++i) again.emplace_back(size_t(1000 + 100 * i));
        for (const auto &b : again) b[b.size() - 1] = 7;
    }
    {
        // a block released by one thread goes back to that thread, not to another
        const void *mine;
        {
            Scratch<int64_t> block(200000);
            mine = block.data();
        }
        const void *theirs = nullptr;
        std::thread([&] {
            Scratch<int64_t> block(200000);  // not the main thread's block
            CHECK(block.data() != mine);
            theirs = block.data();
        }).join();  // ended: its block now serves any thread
        Scratch<int64_t> own(200000);
        if (kCaching) CHECK(own.data() == mine);  // the thread's own block first
        Scratch<int64_t> left(200000);
        if (kCaching) CHECK(left.data() == theirs);  // then the ended thread's
    }
    if (failures == 0) std::printf("scratch: ok (caching %s)\n", kCaching ? "on" : "off");
    return failures == 0 ? 0 : 1;
}
