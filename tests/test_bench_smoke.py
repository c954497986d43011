"""The benchmark runs (at a tiny size) so that it cannot rot; nothing is timed here."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import approxmul_cffi as am
from support import ROOT


def test_bench_gemm_quick_runs(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gemm.py"),
                             "--quick", "--json", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    whats = {r["what"] for r in data["results"]}
    assert "numpy float32 matmul" in whats
    assert any(w.startswith("approxmul random 8x8 table") for w in whats)
    assert all(r["gproducts_per_s"] > 0 for r in data["results"])
    # the scaling rows: every engine at 1 thread and at --threads (default 2)
    scaled = {(r["shape"], r["what"].split(" [")[0]) for r in data["scaling"]}
    assert ("quick-32x48x40", "approxmul exact 8-bit") in scaled
    assert all(r["threads"] == 2 and r["gproducts_per_s_1"] > 0 and r["gproducts_per_s_n"] > 0
               for r in data["scaling"])


def test_bench_sweep_quick_runs(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_sweep.py"),
                             "--tasks", "2", "--tile", "1", "--pause", "0", "--json", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert [r["engine"] for r in data["results"]] == [
        "serial evaluate, 1 thread", "sweep, 1 worker process(es)", "sweep, 2 worker process(es)"]


def test_bench_netlist_quick_runs():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_netlist.py"), "--quick"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "4x4 TMR array" in result.stdout and "compiled C model" in result.stdout


def test_bench_gemm_interleaved_quick_runs(tmp_path):
    out = tmp_path / "interleaved.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gemm.py"),
                             "--interleaved", "--quick", "--json", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = json.loads(out.read_text())["interleaved"]
    timed = [r for r in rows if r["speed_vs_isolated"] is not None]
    assert {r["situation"] for r in timed} >= {"isolated", "after numpy f32 matmul 512"}
    assert all(r["ms"] > 0 for r in timed)
    assert any(r["situation"].endswith("in threads.exclusive()") for r in rows)


def test_bench_quantize_quick_runs(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_quantize.py"),
                             "--quick", "--repeats", "2", "--pause", "0", "--json", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert [r["case"].split()[0] for r in data["results"]] == \
        ["quantize"] * 3 + ["dequantize"] * 2 + ["requantize"] * 2
    assert data["conv2d_ms"] > 0
    assert all(r["numpy_ms"] > 0 and r["c_ms"] > 0 for r in data["results"])


@pytest.mark.parametrize("model", ["resnet50", "shufflenet"])
def test_bench_onnx_quick_runs(tmp_path, model):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_onnx.py"),
                             "--model", model, "--quick", "--json", str(out)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert {r["what"] for r in data["results"]} == {
        "approxmul float (NumPy)", "approxmul integer, exact", "approxmul integer, 8x8 table",
        "onnxruntime float", "onnxruntime integer"}
    assert all(r["ms"] > 0 for r in data["results"])
    assert data["machine"]["model"] == model


def test_bench_keras_quick_runs():
    pytest.importorskip("tensorflow")
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_keras.py"), "--quick"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.split() for line in result.stdout.splitlines() if "@" in line]
    assert [r[0] for r in rows] == ["3->16@32", "16->16@32", "32->32@16", "64->64@8"]
    assert all(float(r[2]) > 0 for r in rows)


def test_bench_evaluate_stability_runs():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_evaluate_stability.py"),
                             "--runs", "2"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("float") and "median" in lines[0]
    assert lines[-1].startswith("worst deviation from a row's median over 2 runs")


def test_bench_factorized_quick_runs(tmp_path):
    """Every plan runs (forced in child processes) and its results were checked."""
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_factorized.py"),
                             "--quick", "--repeat", "1", "--json", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = json.loads(out.read_text())["results"]
    plans = {(r["name"], r["plan"]) for r in rows}
    assert ("truncated(cut=4), rank 5", "factorized-gemm") in plans
    assert ("truncated(cut=4), rank 5", "table") in plans
    if am.info()["kernel.nibble-table"].startswith("16-byte"):
        assert ("truncated(cut=4), rank 5", "exact-plus-table") in plans
    assert all(r["gproducts_per_s"] > 0 for r in rows)


def test_bench_vendor_quick_runs():
    """Compiles the stand-in vendor model, checks approxmul against the naive loop."""
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_vendor.py"), "--quick",
                             "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "plan function" in result.stdout and "naive / approxmul" in result.stdout


def test_bench_torch_small_runs(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_torch.py"),
                             "--batch", "2", "--repeat", "1", "--json", str(out)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {r["name"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["adapter overhead"]["raw_ms"] > 0 and rows["adapter overhead"]["layer_ms"] > 0
    glue = rows["adapter glue"]
    assert glue["library_ms"] > 0 and glue["layer_ms"] == rows["adapter overhead"]["layer_ms"]
    assert rows["per-call cost, linear 8x64->10"]["layer_us"] > 0
    inter = rows["interleaving"]
    assert inter["alone_ms"] > 0 and inter["inside_ms"] > 0
    assert inter["ratio"] == pytest.approx(inter["alone_ms"] / inter["inside_ms"])


def test_bench_pointwise_runs():
    """conv2d and matmul agree on every pointwise shape; a ratio per shape."""
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_pointwise.py"),
                             "--samples", "1"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("conv2d / matmul") == 5
    assert result.stdout.count("NHWC / matmul") == 5


def c_compiler():
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "a C compiler (CI installs gcc)"
    return compiler


@pytest.mark.parametrize("harness, args", [
    ("ab_matmul", ["40", "70", "30", "drum:k=4", "2", "1"]),
    # the harness's own seeded table: the table kernels' before/after rows
    ("ab_matmul", ["40", "300", "130", "random-table:bits=8", "2", "1"]),
    ("ab_conv2d", ["4", "6", "exact", "1", "1"]),
    ("ab_quantize", ["5000", "2", "1"]),
])
def test_ab_harness_builds_and_compares_a_library_with_itself(tmp_path, harness, args):
    """The in-process A/B harnesses (docs/benchmarks.md's before/after tables)
    compile, and timing this build against itself prints equal outputs."""
    compiler = c_compiler()
    exe = tmp_path / harness
    built = subprocess.run([compiler, "-O2", "-Wall", "-Werror", f"-I{ROOT / 'capi' / 'include'}",
                            str(ROOT / "benchmarks" / f"{harness}.c"), "-o", str(exe), "-ldl", "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    library = am.info()["library"]
    # the environment as it is: a sanitized build's runtimes stay preloaded
    result = subprocess.run([str(exe), library, library, *args], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "AB_BATCH": "2"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "new/old" in result.stdout and "DIFFER" not in result.stdout


def test_core_probe_builds_and_counts_each_thread(tmp_path):
    compiler = c_compiler()
    exe = tmp_path / "core_probe"
    built = subprocess.run([compiler, "-O2", "-fopenmp", "-Wall", "-Werror",
                            str(ROOT / "benchmarks" / "core_probe.c"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    result = subprocess.run([str(exe), "2", "1"], capture_output=True, text=True, timeout=60)
    if result.returncode == 1:  # a CPU without AVX-512 VNNI: it says so and stops
        assert "needs AVX-512 VNNI" in result.stderr
        return
    assert result.returncode == 0, result.stderr
    counts = [int(v) for v in result.stdout.split()]
    assert len(counts) == 2 and all(c > 0 for c in counts)


def test_shuffle_probe_builds_and_times_the_table_kernels_step(tmp_path):
    """benchmarks/shuffle_throughput.c (the table kernel's bound in
    docs/benchmarks.md) compiles; on a CPU with AVX-512 VBMI it times the
    shuffles and the kernel's register step and prints their rates."""
    from support import cpu_features

    compiler = c_compiler()
    exe = tmp_path / "shuffles"
    built = subprocess.run([compiler, "-O2", "-Wall", "-Werror", "-mavx512f", "-mavx512bw",
                            "-mavx512vbmi", str(ROOT / "benchmarks" / "shuffle_throughput.c"),
                            "-o", str(exe)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    if "avx512vbmi" not in cpu_features():
        return  # built for the instruction set; running it needs the CPU
    result = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    step = re.search(r"step in registers: ([\d.]+) cycles per 64 products .*"
                     r"without its 2 shifts ([\d.]+)", result.stdout)
    assert step, result.stdout
    assert float(step.group(1)) > 0 and float(step.group(2)) > 0  # rates, not asserted
