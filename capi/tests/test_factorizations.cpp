// Internal check: every family that supplies a Factorization reproduces its
// own products exactly, M(a, b) = sum_r u[r][a] v[r][b], over all 8-bit
// operand pairs (and a few other widths, RoBA's up to 12 bits), signed and
// unsigned. And the
// error part of an 8-bit exact-plus-table plan: the nibble kernel's table
// plan, although truncation's error has a short factorization; the byte-pair
// error parts of wide broken arrays, on every operand pair. And the
// general search of find_factorization on tables of known integer rank,
// small and huge entries (the sanitizer build runs this: no overflow).
#include <climits>
#include <cstdio>
#include <random>
#include <string>

#include "../src/core/error.hpp"
#include "../src/core/structure.hpp"
#include "../src/multipliers/library.hpp"

using namespace approxmul;

static int failures = 0;

static void check(const std::string &spec) {
    const auto m = library::from_spec(spec);
    const Factorization &f = m->factorization();
    if (f.rank == 0) {
        std::printf("%s: no factorization\n", spec.c_str());
        ++failures;
        return;
    }
    const int64_t side = int64_t{1} << m->bits();
    for (int64_t a = m->min_operand(); a <= m->max_operand(); ++a)
        for (int64_t b = m->min_operand(); b <= m->max_operand(); ++b) {
            const int64_t pa = a & (side - 1), pb = b & (side - 1);
            int64_t sum = 0;
            for (int r = 0; r < f.rank; ++r) sum += f.u[size_t(r * side + pa)] * f.v[size_t(r * side + pb)];
            if (sum != m->product(a, b)) {
                std::printf("%s: factorization gives %lld for %lld*%lld, product is %lld\n",
                            spec.c_str(), (long long)sum, (long long)a, (long long)b,
                            (long long)m->product(a, b));
                ++failures;
                return;
            }
        }
    std::printf("%s: rank %d ok (plan %s)\n", spec.c_str(), f.rank, plan_name(m->plan()));
}

// Where 8-bit truncation with cut 1-4 runs as exact plus a low-nibble
// error (the instruction set has a nibble kernel and prefers it to the
// factorization: test_families.py states where), that error (rank cut)
// runs on the table plan, the nibble kernel
static void check_nibble_error(int cut) {
    const std::string spec = "truncated:bits=8,cut=" + std::to_string(cut);
    const auto m = library::from_spec(spec);
    if (m->plan() != Plan::ExactPlusTable) return;
    const auto &parts = m->error_parts();
    if (parts.size() != 1 || parts[0].a_shift != 0 || parts[0].b_shift != 0 ||
        parts[0].table->plan() != Plan::Table) {
        std::printf("%s: plan %s, %zu error parts, the first on plan %s\n", spec.c_str(),
                    plan_name(m->plan()), parts.size(),
                    parts.empty() ? "none" : plan_name(parts[0].table->plan()));
        ++failures;
    }
}

// A wide broken array on the exact-plus-table plan: a b plus its error
// parts, each looked up by one byte of a's and one of b's raw patterns,
// reproduces the family's products on every operand pair (the plan's own
// guard checks a few hundred thousand); `parts` of them, as the dropped
// cells say
static void check_byte_pair_errors(const std::string &spec, size_t parts) {
    const auto m = library::from_spec(spec);
    if (m->plan() != Plan::ExactPlusTable || m->error_parts().size() != parts) {
        std::printf("%s: plan %s with %zu error parts, expected exact-plus-table with %zu\n",
                    spec.c_str(), plan_name(m->plan()), m->error_parts().size(), parts);
        ++failures;
        return;
    }
    const uint32_t mask = m->operand_mask();
    for (int64_t a = m->min_operand(); a <= m->max_operand(); ++a)
        for (int64_t b = m->min_operand(); b <= m->max_operand(); ++b) {
            int64_t sum = a * b;
            for (const auto &part : m->error_parts())
                sum += part.table->product((uint32_t(a) & mask & part.a_mask) >> part.a_shift,
                                           (uint32_t(b) & mask & part.b_mask) >> part.b_shift) *
                       (int64_t{1} << part.scale);
            if (sum != m->product(a, b)) {
                std::printf("%s: (%lld, %lld) gives %lld from its parts, %lld from the family\n",
                            spec.c_str(), (long long)a, (long long)b, (long long)sum,
                            (long long)m->product(a, b));
                ++failures;
                return;
            }
        }
    std::printf("%s: %zu byte-pair error parts ok\n", spec.c_str(), parts);
}

// find_factorization on sum_r p_r(a) q_r(b) (entries from next): what it
// finds must reproduce the table; with found_rank > 0 it must find that rank.
template <typename Next>
static void check_search(const char *what, int rank, int found_rank, Next next) {
    constexpr size_t side = 256;
    std::vector<int64_t> p(rank * side), q(rank * side);
    for (auto &x : p) x = next();
    for (auto &x : q) x = next();
    std::vector<int32_t> table(side * side);
    for (size_t a = 0; a < side; ++a)
        for (size_t b = 0; b < side; ++b) {
            __int128 sum = 0;
            for (int r = 0; r < rank; ++r) sum += __int128{p[r * side + a]} * q[r * side + b];
            table[a * side + b] = static_cast<int32_t>(std::max<__int128>(INT32_MIN, std::min<__int128>(INT32_MAX, sum)));
        }
    const Factorization f = find_factorization(table, 8, 6, 6);
    if (found_rank > 0 && f.rank != found_rank) {
        std::printf("%s: rank %d found, %d expected\n", what, f.rank, found_rank);
        ++failures;
        return;
    }
    for (size_t a = 0; a < side && f.rank > 0; ++a)
        for (size_t b = 0; b < side; ++b) {
            __int128 sum = 0;
            for (int r = 0; r < f.rank; ++r) sum += __int128{f.u[r * side + a]} * f.v[r * side + b];
            if (sum != table[a * side + b]) {
                std::printf("%s: the factorization misses entry (%zu, %zu)\n", what, a, b);
                ++failures;
                return;
            }
        }
    std::printf("%s: rank %d\n", what, f.rank);
}

int main() {
    std::mt19937_64 rng(5);
    auto in = [&](int64_t lo, int64_t hi) {
        return [&rng, lo, hi] { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    };
    for (int rank = 1; rank <= 6; ++rank)
        check_search(("small entries, rank " + std::to_string(rank)).c_str(), rank, rank, in(-20, 20));
    check_search("full rank", 40, -1, in(-300, 300));
    // large entries (products up to 1.8e9: the numbers of the search grow
    // toward its limits), and entries near the int32 ends (clamped):
    // whatever is found is exact
    check_search("large entries, rank 2", 2, -1, in(-30000, 30000));
    for (int rank = 1; rank <= 3; ++rank) {
        check_search("huge entries", rank, -1, in(-60000, 60000));
        check_search("extremes", rank, -1, [&] {
            const int64_t pick[] = {0, 1, -1, 46340, -46341, INT32_MAX, INT32_MIN};
            return pick[std::uniform_int_distribution<int>(0, 6)(rng)];
        });
    }
    for (int cut : {1, 2, 3, 4}) check_nibble_error(cut);
    for (const char *bits : {"4", "8"}) {
        const std::string b = std::string("bits=") + bits;
        for (int cut : {0, 1, 3, 6, 7, 8, 11})
                if (cut < 2 * std::stoi(bits))
            for (int correct : {0, 1})
                check("truncated:" + b + ",cut=" + std::to_string(cut) + ",correct=" + std::to_string(correct));
        check("bam:" + b + ",hbl=2,vbl=7");
        check("bam:" + b + ",hbl=3,vbl=0");
        check("bam:" + b + ",hbl=1,vbl=4");
        for (const char *sign : {"0", "1"})
            for (int k : {2, 3, 4}) {
                check("drum:" + b + ",signed=" + sign + ",k=" + std::to_string(k));
                check("dsm:" + b + ",signed=" + sign + ",m=" + std::to_string(k));
            }
    }
    // every byte pair that holds dropped cells has a part: cut 10 at 10 bits
    // reaches the cross pairs, cut 17 at 12 bits the high pair; rows below
    // hbl every pair with b's low byte
    for (const char *sign : {"0", "1"}) {
        const std::string s = std::string(",signed=") + sign;
        check_byte_pair_errors("truncated:bits=10,cut=10" + s, 3);
        check_byte_pair_errors("truncated:bits=10,cut=6,correct=1" + s, 1);
        check_byte_pair_errors("truncated:bits=12,cut=12,correct=1" + s, 3);
        check_byte_pair_errors("bam:bits=10,hbl=2,vbl=9" + s, 3);
    }
    check_byte_pair_errors("truncated:bits=12,cut=17", 4);
    check_byte_pair_errors("bam:bits=12,hbl=9,vbl=0", 4);
    // RoBA's rank 2 is supplied for models without a table only
    for (const char *bits : {"9", "12"})
        for (const char *sign : {"0", "1"})
            check(std::string("roba:bits=") + bits + ",signed=" + sign);
    std::printf("%s\n", failures ? "FAILED" : "all factorizations exact");
    return failures ? 1 : 0;
}
