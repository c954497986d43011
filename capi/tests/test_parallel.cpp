// Internal check of kernels/parallel.hpp: every index runs exactly once
// whatever the counts of indices and threads, each thread's State is made,
// used and destroyed on that thread, and an exception from a body or from
// a State's constructor reaches the caller after the loop.
#include <atomic>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../src/kernels/parallel.hpp"
#include "check.h"

using namespace approxmul;

namespace {

std::mutex lock;
std::vector<std::thread::id> made, destroyed;

struct Recorded {
    std::thread::id owner = std::this_thread::get_id();
    int64_t ran = 0;
    Recorded() {
        std::lock_guard<std::mutex> hold(lock);
        made.push_back(owner);
    }
    ~Recorded() {
        std::lock_guard<std::mutex> hold(lock);
        destroyed.push_back(std::this_thread::get_id());
    }
};

struct Refused {
    Refused() { throw std::runtime_error("no state"); }
};

}  // namespace

int main() {
    for (int threads : {1, 2, 3, 8})
        for (int64_t n : {0, 1, 2, 5, 7, 64, 1001}) {
            std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
            std::atomic<int64_t> elsewhere{0};
            made.clear(), destroyed.clear();
            kernels::parallel_for_each<Recorded>(n, threads, [&](int64_t i, Recorded &state) {
                runs[static_cast<size_t>(i)].fetch_add(1);
                if (state.owner != std::this_thread::get_id()) elsewhere.fetch_add(1);
                ++state.ran;
            });
            for (const auto &r : runs) CHECK(r.load() == 1);
            CHECK(elsewhere.load() == 0);
            CHECK(made.size() == destroyed.size() && made.size() <= static_cast<size_t>(threads));
            for (const auto &id : made) {  // each made and destroyed on one thread
                int count = 0;
                for (const auto &d : destroyed) count += d == id;
                CHECK(count == 1);
            }
            std::vector<std::atomic<int>> plain(static_cast<size_t>(n));
            kernels::parallel_for(n, threads, [&](int64_t i, int thread) {
                CHECK(thread >= 0 && thread < threads);
                plain[static_cast<size_t>(i)].fetch_add(1);
            });
            for (const auto &r : plain) CHECK(r.load() == 1);
        }
    bool caught = false;
    try {
        kernels::parallel_for(100, 2, [&](int64_t i, int) {
            if (i == 37) throw std::runtime_error("index 37");
        });
    } catch (const std::runtime_error &e) {
        caught = std::string(e.what()) == "index 37";
    }
    CHECK(caught);
    caught = false;
    std::atomic<int> ran{0};
    try {
        kernels::parallel_for_each<Refused>(100, 2, [&](int64_t, Refused &) { ran.fetch_add(1); });
    } catch (const std::runtime_error &e) {
        caught = std::string(e.what()) == "no state";
    }
    CHECK(caught);
    CHECK(ran.load() == 0);  // no body without its state
    if (failures == 0) std::printf("parallel: ok\n");
    return failures == 0 ? 0 : 1;
}
