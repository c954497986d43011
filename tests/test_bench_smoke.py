"""The benchmark runs (at a tiny size) so that it cannot rot; nothing is timed here."""

import json
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


def test_bench_onnx_quick_runs(tmp_path):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_onnx.py"),
                             "--quick", "--json", str(out)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert {r["what"] for r in data["results"]} == {
        "approxmul float (NumPy)", "approxmul integer, exact", "approxmul integer, 8x8 table",
        "onnxruntime float", "onnxruntime integer"}
    assert all(r["ms"] > 0 for r in data["results"])


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
    assert rows["per-call cost, linear 8x64->10"]["layer_us"] > 0
    inter = rows["interleaving"]
    assert inter["alone_ms"] > 0 and inter["inside_ms"] > 0
    assert inter["ratio"] == pytest.approx(inter["alone_ms"] / inter["inside_ms"])
