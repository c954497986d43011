// Run-time dispatch: which instruction set's kernels this process uses, and
// which kernel computes each plan.
//
// The instruction set is chosen once, at first use: APPROXMUL_ISA
// (generic|avx2|avx512|avx512amx) when set, else the best the CPU supports. Forcing a
// set the CPU lacks, or an unknown name, is not a crash: every kernel call
// then fails with APPROXMUL_ERR_UNSUPPORTED and a message saying why, and
// approxmul_build_info() reports isa=unavailable with the reason.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "../core/error.hpp"
#include "../core/structure.hpp"
#include "drivers.hpp"
#include "isa.hpp"
#include "kernels.hpp"

namespace approxmul::kernels {

namespace {

struct Cpu {
    bool avx2 = false;
    bool avx512 = false;  // F, BW, VL, DQ, VNNI and VBMI: the set the avx512 kernels use
    bool amx = false;     // avx512 and AMX-TILE/INT8, with the kernel's leave to use the tiles
    std::string features;
};

// Linux gives a process the AMX tile state only when asked (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); it refuses where the CPU or
// the kernel lacks AMX, or where a thread's alternate signal stack is too
// small for the larger signal frame. Asked once, when the kernels are chosen.
bool amx_permitted() {
#if defined(__linux__) && defined(__x86_64__) && defined(SYS_arch_prctl)
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}

Cpu detect_cpu() {
    Cpu cpu;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    struct Feature {
        const char *name;
        bool present;
    };
    // __builtin_cpu_supports also checks that the OS saves the wide registers
    Feature features[] = {
        {"avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")},
        {"avx512f", __builtin_cpu_supports("avx512f") != 0},
        {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
        {"avx512vl", __builtin_cpu_supports("avx512vl") != 0},
        {"avx512dq", __builtin_cpu_supports("avx512dq") != 0},
        {"avx512vnni", __builtin_cpu_supports("avx512vnni") != 0},
        {"avx512vbmi", __builtin_cpu_supports("avx512vbmi") != 0},
    };
    // APPROXMUL_HIDE_CPU_FEATURES=avx512vbmi,...: treat those as absent, so
    // that tests reach the "CPU lacks it" paths on any machine
    const char *hidden = std::getenv("APPROXMUL_HIDE_CPU_FEATURES");
    const std::string hide = std::string(",") + (hidden ? hidden : "") + ",";
    cpu.avx512 = true;
    for (Feature &f : features) {
        f.present = f.present && hide.find(std::string(",") + f.name + ",") == std::string::npos;
        if (f.present) cpu.features += std::string(cpu.features.empty() ? "" : ",") + f.name;
        if (std::strncmp(f.name, "avx512", 6) == 0) cpu.avx512 = cpu.avx512 && f.present;
    }
    cpu.avx2 = features[0].present;
    cpu.avx512 = cpu.avx512 && cpu.avx2;
    // CPUID leaf 7 EDX bits 24 and 25 (compilers' __builtin_cpu_supports
    // differ on AMX's names); the OS side is amx_permitted's
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool amx = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx >> 24 & 1) &&
                     (edx >> 25 & 1) && hide.find(",amx-int8,") == std::string::npos;
    if (amx) cpu.features += ",amx-int8";
    cpu.amx = cpu.avx512 && amx;
#endif
    return cpu;
}

struct Choice {
    const KernelTable *table = nullptr;  // nullptr: error says why
    std::string error;
    std::string cpu_features;
};

Choice choose() {
    Choice choice;
    const Cpu cpu = detect_cpu();
    choice.cpu_features = cpu.features.empty() ? "none" : cpu.features;
    const KernelTable *avx2 = avx2_kernel_table();      // nullptr when not built
    const KernelTable *avx512 = avx512_kernel_table();  // nullptr when not built
    const KernelTable *amx = avx512amx_kernel_table();  // nullptr when not built
    const char *forced = std::getenv("APPROXMUL_ISA");
    const bool forced_amx = forced != nullptr && std::strcmp(forced, "avx512amx") == 0;
    // only where the set would run: the request changes the process's signal frames
    const bool amx_usable = cpu.amx && amx && (forced == nullptr || *forced == '\0' || forced_amx) &&
                            amx_permitted();
    if (forced == nullptr || *forced == '\0') {
        choice.table = amx_usable              ? amx
                       : cpu.avx512 && avx512 ? avx512
                       : cpu.avx2 && avx2   ? avx2
                                            : generic_kernel_table();
        return choice;
    }
    const std::string name(forced);
    if (name == "generic") {
        choice.table = generic_kernel_table();
    } else if (name == "avx512amx") {
        if (amx == nullptr)
            choice.error = "APPROXMUL_ISA=avx512amx: this build has no avx512amx kernels";
        else if (!amx_usable)
            choice.error = "APPROXMUL_ISA=avx512amx: this CPU lacks it, or Linux refused the "
                           "AMX tile state (needs avx512f,bw,vl,dq,vnni,vbmi and amx-tile, "
                           "amx-int8; the CPU has " + choice.cpu_features + ")";
        else
            choice.table = amx;
    } else if (name == "avx2" || name == "avx512") {
        const bool is512 = name == "avx512";
        const KernelTable *table = is512 ? avx512 : avx2;
        if (table == nullptr)
            choice.error = "APPROXMUL_ISA=" + name + ": this build has no " + name + " kernels";
        else if (!(is512 ? cpu.avx512 : cpu.avx2))
            choice.error = "APPROXMUL_ISA=" + name + ": this CPU lacks it (" +
                           (is512 ? "needs avx512f,bw,vl,dq,vnni,vbmi" : "needs avx2,fma") +
                           "; the CPU has " + choice.cpu_features + ")";
        else
            choice.table = table;
    } else {
        choice.error = "APPROXMUL_ISA=" + name + " is not one of generic, avx2, avx512, avx512amx";
    }
    return choice;
}

const Choice &choice() {
    static const Choice c = choose();
    return c;
}

}  // namespace

#if !APPROXMUL_HAVE_AVX2
const KernelTable *avx2_kernel_table() { return nullptr; }
#endif
#if !APPROXMUL_HAVE_AVX512
const KernelTable *avx512_kernel_table() { return nullptr; }
#endif
#if !APPROXMUL_HAVE_AVX512AMX
const KernelTable *avx512amx_kernel_table() { return nullptr; }
#endif

bool cpu_runs(const KernelTable &t) {
    static const Cpu cpu = detect_cpu();
    if (std::strcmp(t.name, "avx2") == 0) return cpu.avx2;
    if (std::strcmp(t.name, "avx512") == 0) return cpu.avx512;
    if (std::strcmp(t.name, "avx512amx") == 0) return cpu.amx;
    return true;
}

const KernelTable &selected_kernels() {
    const Choice &c = choice();
    if (c.table == nullptr) fail(APPROXMUL_ERR_UNSUPPORTED, "%s", c.error.c_str());
    return *c.table;
}

void matmul(const MatmulProblem &problem) {
    const KernelTable &kernels = selected_kernels();
    if (problem.a_col_offsets != nullptr)
        fail(APPROXMUL_ERR_INTERNAL, "matmul: column offsets are matmul_in_place's");
    // The generic set runs the portable reference kernels for every plan.
    if (std::strcmp(kernels.name, "generic") != 0) {
        if (u8_gemm(kernels, problem)) return;
        if (int16_gemm(kernels, problem)) return;
        if (split_gemm(kernels, problem)) return;
        if (exact_plus_table_gemm(kernels, problem)) return;
        if (table_gemm(kernels, problem)) return;
    }
    generic_matmul(problem);
}

bool matmul_in_place(const MatmulProblem &problem) {
    const KernelTable &kernels = selected_kernels();
    return std::strcmp(kernels.name, "generic") != 0 && u8_gemm(kernels, problem);
}

void multiply(const Multiplier &m, const MatrixView &a, const MatrixView &b,
              const MatrixView &c) {
    selected_kernels();  // a forced, unavailable instruction set fails every call alike
    generic_multiply(m, a, b, c);
}

const char *active_isa() {
    const Choice &c = choice();
    return c.table ? c.table->name : "unavailable";
}

namespace {

// APPROXMUL_MAX_FACTORIZED_RANK=0..8 overrides the set's choice (tests and
// benchmarks reach both plans with it on every machine; tables whose error
// lives in the low nibbles also need APPROXMUL_NIBBLE_ERRORS=0 to keep their
// factorization on AVX2); -1 when unset or invalid.
int forced_rank() {
    static const int forced = [] {
        const char *text = std::getenv("APPROXMUL_MAX_FACTORIZED_RANK");
        const bool valid = text != nullptr && text[0] >= '0' && text[0] <= '0' + kMaxByteFactorizedRank &&
                           text[1] == '\0';
        return valid ? text[0] - '0' : -1;
    }();
    return forced;
}

}  // namespace

int max_factorized_rank(int bits) {
    const Choice &c = choice();
    // an unavailable forced set fails at the first kernel call, not here
    if (bits > kMaxTabulatedBits || c.table == nullptr) return kMaxFactorizedRank;
    if (forced_rank() >= 0) return forced_rank();
    return std::min(kMaxFactorizedRank, c.table->max_factorized_rank);
}

int max_byte_factorized_rank(int bits) {
    const Choice &c = choice();
    const int longest = max_factorized_rank(bits);
    if (bits > kMaxTabulatedBits || c.table == nullptr || forced_rank() >= 0) return longest;
    return c.table->u8_tile_quads > 0 ? std::max(longest, kMaxByteFactorizedRank) : longest;
}

int max_lattice_rank(int bits) {
    const int longest = max_factorized_rank(bits);
    if (bits > kMaxTabulatedBits || forced_rank() >= 0) return longest;
    return std::min(longest, kMaxLatticeRank);
}

bool plans_nibble_errors() {
    static const bool off = [] {
        const char *text = std::getenv("APPROXMUL_NIBBLE_ERRORS");
        return text != nullptr && std::strcmp(text, "0") == 0;
    }();
    const Choice &c = choice();
    return !off && c.table != nullptr && c.table->nibble_block != nullptr;
}

int nibble_error_min_rank(bool byte_factors) {
    const Choice &c = choice();
    if (c.table == nullptr) return kMaxFactorizedRank + 1;
    return byte_factors ? c.table->nibble_error_min_rank_u8 : c.table->nibble_error_min_rank;
}

std::string dispatch_info() {
    const Choice &c = choice();
    std::string info = std::string("isa=") + active_isa() + "\ncpu_features=" + c.cpu_features;
    if (c.table == nullptr) return info + "\nisa_error=" + c.error + "\n";
    const bool portable = std::strcmp(c.table->name, "generic") == 0;
    info += std::string("\nkernel.exact-gemm=") +
            (portable ? "tiled reference (generic.cpp)" : c.table->gemm_kernel);
    info += std::string("\nkernel.byte-gemm=") +
            (c.table->u8_kernel ? c.table->u8_kernel : "none (8-bit plans run on the int16 GEMM)");
    info += std::string("\nkernel.factorized-gemm=") +
            (portable ? "tiled reference over the table" : c.table->gemm_kernel);
    info += std::string("\nkernel.table=") +
            (portable ? "tiled reference (generic.cpp)" : c.table->table_kernel);
    info += std::string("\nkernel.nibble-table=") +
            (c.table->nibble_kernel ? c.table->nibble_kernel : "none (tables up to 4 bits run as tables)");
    info += "\nkernel.function=tiled reference, one model call per product or per outer-product "
            "step; C models: one dot-loop call per output and block; Mitchell and ILM: GEMM blocks "
            "in int64 vector lanes\n";
    return info;
}

}  // namespace approxmul::kernels
