"""`approxmul evaluate --model x.onnx` and `approxmul layers x.onnx` as subprocesses."""

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from approxmul_cffi.datasets import load_digits  # noqa: E402
from onnx_models import lenet_onnx  # noqa: E402
from support import approxmul  # noqa: E402


def test_evaluate_an_onnx_model_gives_the_native_rows(tmp_path):
    onnx.save(lenet_onnx(), str(tmp_path / "lenet.onnx"))
    x, y = load_digits("test")
    np.savez(tmp_path / "data.npz", x=x[:80], y=y[:80], calibration=load_digits("train")[0])
    common = ["-m", "drum:k=4", "--layer", "fc2=truncated:bits=8,cut=6", "--no-progress"]
    onnx_run = approxmul("evaluate", "--model", "lenet.onnx", "--data", "data.npz", *common,
                         "--json", "onnx.json", "--plot", "onnx.png", cwd=tmp_path)
    assert onnx_run.returncode == 0, onnx_run.stderr
    native = approxmul("evaluate", "--data", "data.npz", *common, "--json", "native.json",
                       cwd=tmp_path)
    assert native.returncode == 0, native.stderr
    rows = json.loads((tmp_path / "onnx.json").read_text())
    expected = json.loads((tmp_path / "native.json").read_text())
    assert [r["multiplier"] for r in rows] == ["float", "exact", "drum:k=4"]
    assert [r["top1"] for r in rows] == [r["top1"] for r in expected]
    assert rows[2]["layers"] == "fc2=truncated:bits=8,cut=6"
    assert (tmp_path / "onnx.png").read_bytes()[:4] == b"\x89PNG"
    # the bundled data set by name
    named = approxmul("evaluate", "--model", "lenet.onnx", "--data", "digits", "-m", "exact",
                      "--limit", "50", "--no-progress", cwd=tmp_path)
    assert named.returncode == 0 and "50 samples of the digits" in named.stdout, named.stderr


def test_layers_of_an_onnx_model(tmp_path):
    onnx.save(lenet_onnx(), str(tmp_path / "lenet.onnx"))
    proc = approxmul("layers", "lenet.onnx", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    native = json.loads(approxmul("layers", "--json", cwd=tmp_path).stdout)
    assert [(r["name"], r["op"], r["macs"]) for r in rows] == \
        [(r["name"], r["op"], r["macs"]) for r in native]


@pytest.mark.parametrize("command", ["evaluate", "layers"])
def test_bad_onnx_files_exit_2_with_one_line(tmp_path, command):
    (tmp_path / "bad.onnx").write_bytes(lenet_onnx().SerializeToString()[:333])
    args = ["--model", "bad.onnx", "--no-progress"] if command == "evaluate" else ["bad.onnx"]
    proc = approxmul(command, *args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.onnx" in lines[0], proc.stderr
