// Scratch memory that outlives a call. The kernels take megabytes of
// temporary buffers per call (byte splits, partial sums, packed operands).
// Given back to malloc at the end of each call, they shrink glibc's heap,
// which returns the pages to the system, and the next call faults every
// page in again and has the kernel zero it: on a Zen 4 that was 0.7 ms of
// a 1.9 ms 8-bit truncated GEMM called from Python (docs/benchmarks.md).
// Blocks of Scratch go back to a small process-wide cache instead and serve
// the next call that asks for a similar size.
#pragma once

#include <cstddef>
#include <type_traits>

namespace approxmul {

// At least `bytes` (64-byte aligned, uninitialised) from the cache or the
// heap; `capacity` receives the block's real size, for scratch_release.
void *scratch_acquire(std::size_t bytes, std::size_t &capacity);
void scratch_release(void *block, std::size_t capacity);
bool scratch_caches();  // false in address sanitizer builds: every block is fresh

// `count` uninitialised elements of a trivial type; movable, not copyable.
template <typename T>
class Scratch {
    static_assert(std::is_trivial<T>::value, "scratch holds plain values");

public:
    Scratch() = default;
    explicit Scratch(std::size_t count) : count_(count) {
        data_ = static_cast<T *>(scratch_acquire(count * sizeof(T), capacity_));
    }
    Scratch(Scratch &&other) noexcept { take(other); }
    Scratch &operator=(Scratch &&other) noexcept {
        if (this != &other) {
            reset();
            take(other);
        }
        return *this;
    }
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
    ~Scratch() { reset(); }

    T *data() const { return data_; }
    T &operator[](std::size_t i) const { return data_[i]; }
    std::size_t size() const { return count_; }

    // At least `count` elements, uninitialised: the block held if it is
    // large enough (contents kept), else a new one (a buffer reused across
    // the jobs of a call, sized by its largest job).
    T *reserve(std::size_t count) {
        if (count > count_) *this = Scratch(count);
        return data_;
    }

private:
    void take(Scratch &other) {
        data_ = other.data_, count_ = other.count_, capacity_ = other.capacity_;
        other.data_ = nullptr, other.count_ = other.capacity_ = 0;
    }
    void reset() {
        if (data_ != nullptr) scratch_release(data_, capacity_);
        data_ = nullptr, count_ = capacity_ = 0;
    }
    T *data_ = nullptr;
    std::size_t capacity_ = 0;
    std::size_t count_ = 0;
};

}  // namespace approxmul
