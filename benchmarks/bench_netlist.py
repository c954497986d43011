"""Time tabulating gate-level netlists: an 8x8 multiplier of a few thousand
gates (target: well under 10 ms) and a 12x12 one, and a 16x16 one (too
wide to tabulate) as the multiplier of a matmul, against the two ways a
user has without approxmul, in the same run:

- a compiled C model: the same gates as C statements, compiled with
  ``cc -O2`` and called once per operand pair (compile time reported apart);
- NumPy: the gates evaluated one by one over all pairs at once (bool arrays);
  for the 16x16 matmul, a C triple loop calling the compiled model per
  product instead.

    APPROXMUL_LIBRARY=build/capi/libapproxmul.so PYTHONPATH=. \\
        python benchmarks/bench_netlist.py [--threads 2] [--repeats 20] [--quick]

The circuit is a triple-modular-redundant array multiplier in NAND2 and
NOT gates with a majority voter per output bit, so every gate matters.
Figures go in docs/benchmarks.md, section "Netlist tabulation".
"""

import argparse
import ctypes
import os
import platform
import subprocess
import tempfile
import time

import numpy as np

import approxmul_cffi as am
from approxmul_cffi import verilog
from bench_metrics import best_of  # this folder is on sys.path when run as a script


def nand_multiplier(n, copies=3):
    """Gates (out, op, x, y) of `copies` NAND-only n x n array multipliers and a majority voter."""
    gates, counter = [], [0]

    def gate(op, x, y=None):
        counter[0] += 1
        name = f"g{counter[0]}"
        gates.append((name, op, x, y))
        return name

    def nand(x, y):
        return gate("nand", x, y)

    def half_adder(x, y):
        n1 = nand(x, y)
        return nand(nand(x, n1), nand(y, n1)), gate("not", n1)

    def full_adder(x, y, z):
        n1 = nand(x, y)
        t = nand(nand(x, n1), nand(y, n1))
        n4 = nand(t, z)
        return nand(nand(t, n4), nand(z, n4)), nand(n1, n4)

    outputs = []
    for _ in range(copies):
        cols = [[] for _ in range(2 * n)]
        for j in range(n):
            for i in range(n):
                cols[i + j].append(gate("not", nand(f"A[{i}]", f"B[{j}]")))
        bits = []
        for k in range(2 * n):
            while len(cols[k]) > 1:
                if len(cols[k]) >= 3:
                    s, c = full_adder(cols[k].pop(0), cols[k].pop(0), cols[k].pop(0))
                else:
                    s, c = half_adder(cols[k].pop(0), cols[k].pop(0))
                cols[k].append(s)
                if k + 1 < 2 * n:
                    cols[k + 1].append(c)
            bits.append(cols[k][0] if cols[k] else None)
        outputs.append(bits)
    voted = []
    for k in range(2 * n):
        o = [copy[k] for copy in outputs]
        if o[0] is None:
            voted.append(None)
            continue
        m3 = nand(o[1], o[2])
        voted.append(nand(gate("not", nand(nand(o[0], o[1]), nand(o[0], o[2]))), m3))
    return gates, voted


def to_verilog(n, gates, outputs):
    lines = [f"module tmr{n} (A, B, O);", f"  input [{n - 1}:0] A, B;", f"  output [{2 * n - 1}:0] O;"]
    lines += [f"  wire {name};" for name, *_ in gates]
    for name, op, x, y in gates:
        lines.append(f"  nand ({name}, {x}, {y});" if op == "nand" else f"  not ({name}, {x});")
    lines += [f"  assign O[{k}] = {o or chr(49) + chr(39) + 'b0'};" for k, o in enumerate(outputs)]
    return "\n".join(lines + ["endmodule", ""])


def to_c(n, gates, outputs):
    def ref(x):
        return f"((a >> {x[2:-1]}) & 1)" if x.startswith("A[") else \
            f"((b >> {x[2:-1]}) & 1)" if x.startswith("B[") else x
    body = [f"  unsigned {name} = " + (f"!({ref(x)} & {ref(y)});" if op == "nand" else f"!{ref(x)};")
            for name, op, x, y in gates]
    result = " | ".join(f"({o} << {k})" for k, o in enumerate(outputs) if o)
    return ("#include <stdint.h>\n"
            "static uint32_t model(uint32_t a, uint32_t b) {\n" + "\n".join(body)
            + f"\n  return {result};\n}}\n"
            f"void table(int32_t *out) {{\n  for (uint32_t a = 0; a < {1 << n}u; ++a)\n"
            f"    for (uint32_t b = 0; b < {1 << n}u; ++b) out[a << {n} | b] = (int32_t)model(a, b);\n}}\n"
            "void gemm(const uint16_t *a, const uint16_t *b, int64_t *c, int rows, int inner, int cols) {\n"
            "  for (int i = 0; i < rows; ++i)\n    for (int j = 0; j < cols; ++j) {\n"
            "      int64_t s = 0;\n      for (int k = 0; k < inner; ++k) s += model(a[i * inner + k], b[k * cols + j]);\n"
            "      c[i * cols + j] = s;\n    }\n}\n")


def numpy_table(n, gates, outputs):
    index = np.arange(1 << (2 * n))
    values = {}
    for k in range(n):
        values[f"A[{k}]"] = (index >> (n + k) & 1).astype(bool)
        values[f"B[{k}]"] = (index >> k & 1).astype(bool)
    last_use = {}
    for position, (_, _, x, y) in enumerate(gates):
        last_use[x] = last_use[y] = position
    keep = set(o for o in outputs if o)
    for position, (name, op, x, y) in enumerate(gates):
        values[name] = ~(values[x] & values[y]) if op == "nand" else ~values[x]
        for used in {x, y} - keep - {None}:  # free what no later gate reads (12 bits: 16M pairs)
            if last_use.get(used) == position:
                del values[used]
    return sum(values[o].astype(np.int64) << k for k, o in enumerate(outputs) if o)


def run(n, repeats, work):
    gates, outputs = nand_multiplier(n)
    text = to_verilog(n, gates, outputs)
    path = os.path.join(work, f"tmr{n}.v")
    with open(path, "w") as handle:
        handle.write(text)
    netlist = verilog.Netlist(path)
    info = netlist.info()
    exact = np.multiply.outer(np.arange(1 << n), np.arange(1 << n))
    m = netlist.multiplier()
    assert np.array_equal(m.table() if n <= 8 else np.asarray(m.error_map()) + exact, exact)

    time.sleep(0.5)
    parse = best_of(lambda: verilog.Netlist(path), repeats)
    time.sleep(0.5)
    tabulate = best_of(netlist.multiplier, repeats)
    plan = 0.0
    if n <= 8:  # the multiplier's own set-up (range, plan) on a finished table
        table = np.asarray(m.table())
        time.sleep(0.5)
        plan = best_of(lambda: am.Multiplier.from_table(table), repeats)

    source = os.path.join(work, f"tmr{n}.c")
    library = os.path.join(work, f"libtmr{n}.so")
    with open(source, "w") as handle:
        handle.write(to_c(n, gates, outputs))
    start = time.perf_counter()
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", library, source], check=True)
    compile_seconds = time.perf_counter() - start
    c_table = ctypes.CDLL(library).table
    out = np.empty(1 << (2 * n), dtype=np.int32)
    c_table(out.ctypes.data_as(ctypes.c_void_p))
    assert np.array_equal(out.reshape(exact.shape), exact)
    time.sleep(0.5)
    c_seconds = best_of(lambda: c_table(out.ctypes.data_as(ctypes.c_void_p)), max(1, repeats // 4))
    time.sleep(0.5)
    numpy_seconds = best_of(lambda: numpy_table(n, gates, outputs), max(1, repeats // 10))

    print(f"{n}x{n} TMR array: {info['gates']} gates, depth {info['depth']}, {4 ** n} pairs")
    print(f"  approxmul parse + levelize        {parse * 1e3:10.2f} ms")
    print(f"  approxmul tabulate (+ plan)       {tabulate * 1e3:10.2f} ms"
          + (f"   (plan alone: from_table {plan * 1e3:.2f} ms)" if n <= 8 else ""))
    print(f"  compiled C model, per pair        {c_seconds * 1e3:10.2f} ms   "
          f"(x{c_seconds / tabulate:.1f}; compiling: {compile_seconds * 1e3:.0f} ms)")
    print(f"  NumPy, gate by gate               {numpy_seconds * 1e3:10.2f} ms   "
          f"(x{numpy_seconds / tabulate:.1f})")


def run_gemm(n, shape, repeats, work):
    """A netlist too wide to tabulate (function plan, simulated a GEMM row at a time) in a matmul."""
    gates, outputs = nand_multiplier(n)
    path = os.path.join(work, f"tmr{n}.v")
    with open(path, "w") as handle:
        handle.write(to_verilog(n, gates, outputs))
    netlist = verilog.Netlist(path)
    m = netlist.multiplier()
    rows, inner, cols = shape
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1 << n, size=(rows, inner)).astype(np.uint16)
    b = rng.integers(0, 1 << n, size=(inner, cols)).astype(np.uint16)
    exact = a.astype(np.int64) @ b.astype(np.int64)
    assert np.array_equal(am.matmul(a, b, m), exact)

    source, library = os.path.join(work, f"tmr{n}.c"), os.path.join(work, f"libtmr{n}.so")
    with open(source, "w") as handle:
        handle.write(to_c(n, gates, outputs))
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", library, source], check=True)
    c_gemm = ctypes.CDLL(library).gemm
    out = np.empty((rows, cols), dtype=np.int64)
    pointer = ctypes.c_void_p
    call = lambda: c_gemm(pointer(a.ctypes.data), pointer(b.ctypes.data), pointer(out.ctypes.data),
                          rows, inner, cols)
    call()
    assert np.array_equal(out, exact)
    time.sleep(0.5)
    ours = best_of(lambda: am.matmul(a, b, m), repeats)
    time.sleep(0.5)
    theirs = best_of(call, max(1, repeats // 4))
    products = rows * inner * cols
    print(f"{n}x{n} TMR array in a {rows}x{inner}x{cols} matmul: {netlist.info()['gates']} gates, "
          f"plan {m.plan}")
    print(f"  approxmul matmul                  {ours * 1e3:10.2f} ms   ({products / ours / 1e6:.1f} M products/s)")
    print(f"  compiled C model in a C loop      {theirs * 1e3:10.2f} ms   "
          f"(x{theirs / ours:.1f}; one thread)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="4-bit only, 2 repeats (smoke test)")
    args = parser.parse_args()
    am.set_num_threads(args.threads)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, "
          f"approxmul threads={args.threads}, {am.info().get('isa')}")
    with tempfile.TemporaryDirectory() as work:
        for n in ((4,) if args.quick else (8, 12)):
            run(n, 2 if args.quick else args.repeats if n <= 8 else max(1, args.repeats // 10), work)
        run_gemm(13 if args.quick else 16, (2, 8, 70) if args.quick else (64, 576, 64),
                 2 if args.quick else max(1, args.repeats // 4), work)


if __name__ == "__main__":
    main()
