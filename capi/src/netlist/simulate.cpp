// Bit-parallel simulation of a levelized circuit: lane l of word w holds
// operand pair p = 64 w + l, p = a << n | b, so one pass over the gates
// evaluates a block of kWords * 64 pairs. Operand bits are fixed patterns
// (bits below 6 alternate within a word, higher ones are whole words), and
// the output words are turned back into products with a 64 x 64 bit
// transpose. Vector-extension blocks compile to SSE2 everywhere and to AVX2
// where the compiler can clone the loop for it.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <limits>

#include "../core/error.hpp"
#include "../core/threads.hpp"
#include "../kernels/parallel.hpp"
#include "netlist.hpp"

namespace approxmul::netlist {
namespace {

constexpr int kWords = 32;  // 2048 pairs per pass over the gates (a few hundred KiB of signals: L2)
typedef uint64_t Block __attribute__((vector_size(kWords * 8)));
static_assert(sizeof(Block) % 64 == 0 && sizeof(Block) % alignof(Block) == 0,
              "whole blocks fill an aligned allocation");

constexpr uint64_t kLanePattern[6] = {0xaaaaaaaaaaaaaaaaull, 0xccccccccccccccccull,
                                      0xf0f0f0f0f0f0f0f0ull, 0xff00ff00ff00ff00ull,
                                      0xffff0000ffff0000ull, 0xffffffff00000000ull};

// Value of bit t of the pair index in the words first_word .. + kWords.
void pair_bit(Block &v, int t, uint64_t first_word) {
    for (int w = 0; w < kWords; ++w)
        v[w] = t < 6 ? kLanePattern[t] : ((first_word + uint64_t(w)) >> (t - 6)) & 1 ? ~uint64_t{0} : 0;
}

// One pass over the gates; V is a word or a block of words (all lanes alike).
template <class V>
__attribute__((always_inline)) inline void evaluate(const Gate *gates, size_t count, V *values,
                                                    size_t first_gate) {
    V *out = values + first_gate;  // gate g writes signal first_gate + g
    for (size_t g = 0; g < count; ++g) {
        const Gate &gate = gates[g];
        const V x = values[gate.in[0]], y = values[gate.in[1]];
        switch (gate.op) {
        case Op::And: out[g] = x & y; break;
        case Op::Or: out[g] = x | y; break;
        case Op::Xor: out[g] = x ^ y; break;
        case Op::Nand: out[g] = ~(x & y); break;
        case Op::Nor: out[g] = ~(x | y); break;
        case Op::Xnor: out[g] = ~(x ^ y); break;
        case Op::Not: out[g] = ~x; break;
        case Op::Mux: out[g] = (x & y) | (~x & values[gate.in[2]]); break;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void run_gates(const Gate *gates, size_t count, Block *values, size_t first_gate) {
    evaluate(gates, count, values, first_gate);
}

// Small outer products (a GEMM of few rows or columns) take 256-pair passes.
constexpr int kSmallWords = 4;
typedef uint64_t SmallBlock __attribute__((vector_size(kSmallWords * 8)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void run_gates(const Gate *gates, size_t count, SmallBlock *values, size_t first_gate) {
    evaluate(gates, count, values, first_gate);
}

// rows[i] bit j <-> rows[j] bit i
void transpose64(uint64_t rows[64]) {
    uint64_t mask = 0x00000000ffffffffull;
    for (int width = 32; width != 0; width >>= 1, mask ^= mask << width)
        for (int k = 0; k < 64; k = ((k | width) + 1) & ~width) {
            const uint64_t t = ((rows[k] >> width) ^ rows[k | width]) & mask;
            rows[k] ^= t << width;
            rows[k | width] ^= t;
        }
}

struct Simulator {
    const Circuit &c;
    // Aligned for every clone of run_gates: the AVX2 one assumes more than
    // the baseline target gives Block (or std::vector) by default
    std::unique_ptr<Block[], decltype(&std::free)> storage;
    Block *values;
    explicit Simulator(const Circuit &circuit)
        : c(circuit),
          storage(static_cast<Block *>(std::aligned_alloc(
                      std::max<size_t>(64, alignof(Block)),
                      (size_t(circuit.first_gate()) + circuit.gates.size()) * sizeof(Block))),
                  &std::free),
          values(storage.get()) {
        if (!values) throw std::bad_alloc();
        for (int w = 0; w < kWords; ++w) {
            values[0][w] = 0;
            values[1][w] = ~uint64_t{0};
        }
    }
    // Products of the pairs in words first_word .. + kWords, as raw output patterns.
    void run(uint64_t first_word, uint64_t *patterns) {
        const int n = c.a_bits;
        for (int k = 0; k < n; ++k) {
            pair_bit(values[2 + size_t(k)], n + k, first_word);  // a is the high half
            pair_bit(values[2 + size_t(n + k)], k, first_word);
        }
        run_gates(c.gates.data(), c.gates.size(), values, c.first_gate());
        uint64_t rows[64];
        for (int w = 0; w < kWords; ++w) {
            size_t k = 0;
            for (; k < c.outputs.size(); ++k) rows[k] = values[c.outputs[k]][w];
            for (; k < 64; ++k) rows[k] = 0;
            transpose64(rows);
            std::copy(rows, rows + 64, patterns + 64 * w);
        }
    }
};

int64_t product_of(uint64_t pattern, const Circuit &c, bool is_signed) {
    const int width = int(c.outputs.size());
    if (is_signed && width > 0 && (pattern >> (width - 1)) & 1) return int64_t(pattern) - (int64_t{1} << width);
    return int64_t(pattern);
}

[[noreturn]] void out_of_range(const Circuit &c, bool is_signed, uint64_t pair, int64_t value) {
    const int n = c.a_bits;
    const uint64_t mask = (uint64_t{1} << n) - 1;
    auto operand = [&](uint64_t pattern) {
        return is_signed && (pattern >> (n - 1)) & 1 ? int64_t(pattern) - (int64_t{1} << n) : int64_t(pattern);
    };
    fail(APPROXMUL_ERR_OUT_OF_RANGE,
         "the netlist gives %lld for a=%lld, b=%lld: outside the %d-bit %s product range of "
         "%d-bit operands (is signed= right?)",
         static_cast<long long>(value), static_cast<long long>(operand(pair >> n & mask)),
         static_cast<long long>(operand(pair & mask)), 2 * n, is_signed ? "signed" : "unsigned", n);
}

bool in_range(int64_t v, int n, bool is_signed) {
    return is_signed ? v >= -(int64_t{1} << (2 * n - 1)) && v < (int64_t{1} << (2 * n - 1))
                     : v >= 0 && v < (int64_t{1} << (2 * n));
}

// Wide netlists (13..16 bits), bit-sliced per product block: a call
// simulates the 64 pairs (a, b') whose second operands share all but the
// low 6 bits of b, one word per signal, and keeps the products for the
// calls that follow on this thread (a row scan, like metrics, then costs
// one pass over the gates per 64 products). The cache is keyed by a
// per-multiplier id, never by an address that could be reused.
struct Block64 {
    uint64_t id = 0;
    uint64_t a = 0, b_high = 0;
    int64_t products[64];
};

int64_t simulate_block(const Circuit &c, bool is_signed, uint64_t id, int64_t a, int64_t b) {
    thread_local std::vector<uint64_t> values;
    thread_local Block64 cache;
    const int n = c.a_bits;
    const uint64_t mask = (uint64_t{1} << n) - 1;
    const uint64_t pa = uint64_t(a) & mask, pb = uint64_t(b) & mask;
    if (cache.id != id || cache.a != pa || cache.b_high != pb >> 6) {
        cache.id = 0;  // invalid until complete
        values.resize(size_t(c.first_gate()) + c.gates.size());
        uint64_t *v = values.data();
        v[0] = 0;
        v[1] = ~uint64_t{0};
        for (int k = 0; k < n; ++k) {
            v[2 + size_t(k)] = (pa >> k) & 1 ? ~uint64_t{0} : 0;
            v[2 + size_t(n + k)] = k < 6 ? kLanePattern[k] : (pb >> k) & 1 ? ~uint64_t{0} : 0;
        }
        evaluate(c.gates.data(), c.gates.size(), v, c.first_gate());
        uint64_t rows[64] = {};
        for (size_t k = 0; k < c.outputs.size(); ++k) rows[k] = v[c.outputs[k]];
        transpose64(rows);
        for (int lane = 0; lane < 64; ++lane) cache.products[lane] = product_of(rows[lane], c, is_signed);
        cache.a = pa;
        cache.b_high = pb >> 6;
        cache.id = id;
    }
    const int64_t value = cache.products[pb & 63];
    if (!in_range(value, n, is_signed)) out_of_range(c, is_signed, pa << n | pb, value);
    return value;
}

// out[i * cols + j] = M(a[i], b[j]) of a wide netlist, in passes of W
// words: lane l of word w holds pair p = 64 w + l of the pass, its operand
// bits transposed into one word per bit (p in row-major order over i, j).
template <class V, int W>
void simulate_outer(const Circuit &c, bool is_signed, const int64_t *a, int64_t rows,
                    const int64_t *b, int64_t cols, int64_t *out) {
    struct Free { void operator()(V *p) const { std::free(p); } };
    thread_local std::unique_ptr<V[], Free> storage;
    thread_local size_t capacity = 0;
    const size_t signals = size_t(c.first_gate()) + c.gates.size();
    if (capacity < signals) {
        storage.reset();
        capacity = 0;
        // aligned for the AVX2 clone (see Simulator); aligned_alloc wants a
        // size that is a multiple of the alignment
        const size_t bytes = (signals * sizeof(V) + 63) / 64 * 64;
        storage.reset(static_cast<V *>(std::aligned_alloc(64, bytes)));
        if (!storage) throw std::bad_alloc();
        capacity = signals;
    }
    V *v = storage.get();
    const int n = c.a_bits;
    const uint64_t mask = (uint64_t{1} << n) - 1;
    for (int w = 0; w < W; ++w) {
        v[0][w] = 0;
        v[1][w] = ~uint64_t{0};
    }
    const int64_t count = rows * cols;
    auto pair = [&](int64_t p) { return (uint64_t(a[p / cols]) & mask) << n | (uint64_t(b[p % cols]) & mask); };
    for (int64_t p0 = 0; p0 < count; p0 += 64 * W) {
        const int64_t lanes = std::min<int64_t>(64 * W, count - p0);
        for (int w = 0; w < W; ++w) {
            uint64_t bits[64] = {};
            for (int64_t l = 0; l < std::min<int64_t>(64, lanes - 64 * w); ++l) bits[l] = pair(p0 + 64 * w + l);
            transpose64(bits);  // bits[t]: bit t of every lane's pair index
            for (int k = 0; k < 2 * n; ++k) v[2 + size_t(k)][w] = bits[k < n ? n + k : k - n];
        }
        run_gates(c.gates.data(), c.gates.size(), v, c.first_gate());
        for (int w = 0; w < W && 64 * w < lanes; ++w) {
            uint64_t patterns[64] = {};
            for (size_t k = 0; k < c.outputs.size(); ++k) patterns[k] = v[c.outputs[k]][w];
            transpose64(patterns);
            for (int64_t l = 0; l < std::min<int64_t>(64, lanes - 64 * w); ++l) {
                const int64_t p = p0 + 64 * w + l, value = product_of(patterns[l], c, is_signed);
                if (!in_range(value, n, is_signed)) out_of_range(c, is_signed, pair(p), value);
                out[p] = value;
            }
        }
    }
}

}  // namespace

std::vector<int32_t> tabulate(const Circuit &c, bool is_signed) {
    const int n = c.a_bits;
    if (n < 1 || n > 12 || c.b_bits != n)
        fail(APPROXMUL_ERR_INTERNAL, "tabulate: %d x %d bits", c.a_bits, c.b_bits);
    const uint64_t pairs = uint64_t{1} << (2 * n);
    const uint64_t words = (pairs + 63) / 64;
    const int64_t passes = int64_t((words + kWords - 1) / kWords);
    std::vector<int32_t> table(pairs);
    const int threads = n > 8 ? std::max(1, num_threads()) : 1;
    std::vector<std::unique_ptr<Simulator>> sims(static_cast<size_t>(threads));
    constexpr int64_t kPassesPerJob = 64;
    kernels::parallel_for((passes + kPassesPerJob - 1) / kPassesPerJob, threads, [&](int64_t job, int thread) {
        auto &sim = sims[size_t(thread)];
        if (!sim) sim.reset(new Simulator(c));
        uint64_t patterns[kWords * 64];
        for (int64_t pass = job * kPassesPerJob; pass < std::min(passes, (job + 1) * kPassesPerJob); ++pass) {
            const uint64_t first = uint64_t(pass) * kWords;
            sim->run(first, patterns);
            const uint64_t start = first * 64, stop = std::min(pairs, start + kWords * 64);
            for (uint64_t p = start; p < stop; ++p) {
                const int64_t value = product_of(patterns[p - start], c, is_signed);
                if (!in_range(value, n, is_signed)) out_of_range(c, is_signed, p, value);
                table[p] = int32_t(value);
            }
        }
    });
    return table;
}

std::shared_ptr<const Multiplier> to_multiplier(std::shared_ptr<const Netlist> netlist, bool is_signed) {
    const Circuit &c = netlist->circuit;
    const int n = c.a_bits;
    if (n <= kMaxTabulatedBits) return Multiplier::from_table(tabulate(c, is_signed), n, is_signed, netlist->module);
    if (n <= 12) {
        auto table = std::make_shared<const std::vector<int32_t>>(tabulate(c, is_signed));
        const uint32_t mask = (uint32_t{1} << n) - 1;
        auto m = Multiplier::from_function(
            [table, mask, n](int64_t a, int64_t b) -> int64_t {
                return (*table)[(uint32_t(a) & mask) << n | (uint32_t(b) & mask)];
            },
            n, is_signed, netlist->module);
        return Multiplier::with_outer_function(
            std::move(m), [table, mask, n](const int64_t *a, int64_t rows, const int64_t *b,
                                           int64_t cols, int64_t *out) {
                for (int64_t i = 0; i < rows; ++i) {
                    const int32_t *row = table->data() + (size_t(uint32_t(a[i]) & mask) << n);
                    for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = row[uint32_t(b[j]) & mask];
                }
            });
    }
    static std::atomic<uint64_t> next_id{1};
    const uint64_t id = next_id++;
    auto m = Multiplier::from_function(
        [netlist, is_signed, id](int64_t a, int64_t b) {
            return simulate_block(netlist->circuit, is_signed, id, a, b);
        },
        n, is_signed, netlist->module);
    return Multiplier::with_outer_function(
        std::move(m), [netlist, is_signed](const int64_t *a, int64_t rows, const int64_t *b,
                                           int64_t cols, int64_t *out) {
            if (rows * cols <= 64 * kSmallWords)
                simulate_outer<SmallBlock, kSmallWords>(netlist->circuit, is_signed, a, rows, b, cols, out);
            else
                simulate_outer<Block, kWords>(netlist->circuit, is_signed, a, rows, b, cols, out);
        });
}

}  // namespace approxmul::netlist
