"""`approxmul evaluate` run as a subprocess, including its error exits."""

import json

import numpy as np
import pytest
from support import approxmul

from approxmul_cffi.evaluation import bundled_model


def assert_user_error(proc, *words):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("approxmul evaluate: error:"), proc.stderr
    for word in words:
        assert word in lines[0]


def test_default_run_prints_the_table(tmp_path):
    proc = approxmul("evaluate", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "450 samples" in lines[0]
    assert lines[1].split()[:3] == ["multiplier", "MAE%", "WCE%"]
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert list(rows)[:2] == ["float", "exact"] and len(rows) >= 6
    assert rows["exact"][3] == rows["float"][3] == "99.56"  # top-1 of the bundled model
    maes = [float(r[1]) for name, r in rows.items() if name not in ("float",)]
    assert maes == sorted(maes)  # built-ins listed by increasing error


def test_options_and_outputs(tmp_path):
    proc = approxmul("evaluate", "--limit", "40", "-m", "drum:k=4", "--multiplier",
                     "exact:bits=8,signed=1", "--layer", "conv1=truncated:bits=8,cut=6",
                     "--threads", "1", "--json", "r.json", "--csv", "r.csv", "--plot", "r.png",
                     "--calibration", "percentile", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "40 samples" in proc.stdout and "conv1=truncated:bits=8,cut=6" in proc.stdout
    rows = json.loads((tmp_path / "r.json").read_text())
    assert [r["multiplier"] for r in rows] == [
        "float", "exact", "exact:signed=1", "drum:k=4", "exact:bits=8,signed=1"]
    assert rows[3]["layers"] == "conv1=truncated:bits=8,cut=6"
    assert (tmp_path / "r.csv").read_text().startswith("multiplier,layers,mae_percent")
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_bias_correction_flag(tmp_path):
    args = ("evaluate", "-m", "truncated:bits=8,cut=10", "--threads", "1", "--no-progress")
    rows = {}
    for extra in ((), ("--bias-correction",)):
        proc = approxmul(*args, *extra, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        rows[extra] = {line.split()[0]: line.split()[3] for line in proc.stdout.splitlines()[3:]}
    assert rows[()]["truncated:bits=8,cut=10"] == "9.33"           # the published figure
    assert rows[("--bias-correction",)]["truncated:bits=8,cut=10"] == "36.22"
    assert rows[()]["exact"] == rows[("--bias-correction",)]["exact"] == "99.56"


def test_own_model_and_data_files(tmp_path):
    model = bundled_model()
    model.save(tmp_path / "mine")
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (20, 1, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x, y=model.predict(x))
    proc = approxmul("evaluate", "--model", "mine.json", "--data", "data.npz", "-m", "exact",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "20 samples of the data.npz" in proc.stdout
    float_row = [line for line in proc.stdout.splitlines() if line.startswith("float")][0]
    assert "100.00" in float_row  # labels are the float model's own predictions


@pytest.mark.parametrize("args, words", [
    (["--layer", "conv9=exact"], ["unknown layer name", "conv9", "conv1, conv2, fc1, fc2"]),
    (["--layer", "conv1"], ["NAME=SPEC"]),
    # wording belongs to whichever spec parser is in use; the spec must be named
    (["-m", "wallace:k=2"], ["wallace"]),
    (["-m", "drum:k=99"], []),
    (["--model", "missing.json"], ["model file not found", "missing.json",
                                   "bundled models: digits-lenet, mnist-lenet5"]),
    (["--data", "missing.npz"], ["data file not found"]),
    # the digits split asked for by name does not fit the MNIST model (it was MNIST silently)
    (["--model", "mnist-lenet5", "--data", "digits"], ["(450, 1, 8, 8)", "(N, 1, 28, 28)"]),
    (["--limit", "0"], ["--limit must be at least 1"]),
    # checked before the evaluation runs
    (["--json", "no-such-folder/r.json"], ["--json no-such-folder/r.json", "does not exist"]),
    (["--json", "r.txt", "--csv", "r.txt"], ["--json and --csv both write r.txt"]),
    (["--threads", "0"], ["--threads must be 1..1024", "got 0"]),
    # beyond the limit OpenMP would abort or crash the process
    (["--threads", "40000"], ["--threads must be 1..1024", "got 40000"]),
    (["--threads", "65535"], ["--threads must be 1..1024"]),
    (["--threads", "99999"], ["--threads must be 1..1024"]),
])
def test_user_errors_exit_2_with_one_line(tmp_path, args, words):
    assert_user_error(approxmul("evaluate", *args, cwd=tmp_path), *words)


def test_truncated_model_and_wrong_data(tmp_path):
    path = bundled_model().save(tmp_path / "m")
    (tmp_path / "m.npz").write_bytes((tmp_path / "m.npz").read_bytes()[:1000])
    assert_user_error(approxmul("evaluate", "--model", path, cwd=tmp_path), "truncated or corrupt")
    np.savez(tmp_path / "bad.npz", x=np.zeros((5, 8, 8), np.float32), y=np.zeros(5, int))
    assert_user_error(approxmul("evaluate", "--data", "bad.npz", cwd=tmp_path),
                      "shape (5, 8, 8)", "(N, 1, 8, 8)")
    np.savez(tmp_path / "nolabels.npz", x=np.zeros((5, 1, 8, 8), np.float32))
    assert_user_error(approxmul("evaluate", "--data", "nolabels.npz", cwd=tmp_path), "lacks", "y")


def test_a_single_array_is_not_a_data_file(tmp_path):
    np.save(tmp_path / "images.npy", np.zeros((2, 1, 8, 8), np.float32))
    assert_user_error(approxmul("evaluate", "--data", "images.npy", cwd=tmp_path),
                      "holds a single array", ".npz", "x, y")


def test_mnist_lenet5_takes_signed_multipliers(tmp_path):
    """The bundled LeNet-5 has output units whose weights trained to about
    1e-35: per-channel signed weights used to refuse it ("bias does not fit
    int32"); now its signed rows are as accurate as its unsigned ones."""
    rows = {}
    for specs in (["exact", "exact:signed=1"], ["exact:bits=12,signed=1"]):
        out = tmp_path / "rows.json"
        proc = approxmul("evaluate", "--model", "mnist-lenet5", *(f"-m{s}" for s in specs),
                         "--no-progress", "--json", str(out), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        rows.update((r["multiplier"], r) for r in json.loads(out.read_text()))
    for spec in ("exact:signed=1", "exact:bits=12,signed=1"):
        assert abs(rows[spec]["top1"] - rows["exact"]["top1"]) <= 0.5, rows


# ---------------------------------------------------------------------------
# `approxmul layers` takes the bundled names `--model` takes


@pytest.mark.parametrize("name", ["mnist-lenet5", "mnist_lenet5"])
def test_layers_of_a_bundled_model_by_name(tmp_path, name):
    proc = approxmul("layers", name, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    model = bundled_model("mnist-lenet5")
    assert list(rows) == [node.name for node in model.nodes]
    assert rows["fc3"]["output_shape"] == [10] and rows["fc3"]["macs"] == 84 * 10
    default = json.loads(approxmul("layers", "--json", cwd=tmp_path).stdout)
    assert json.loads(approxmul("layers", "digits-lenet", "--json", cwd=tmp_path).stdout) == \
        default


def test_layers_of_an_unknown_model_lists_the_bundled_names(tmp_path):
    proc = approxmul("layers", "mnist-lenet", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line, = proc.stderr.strip().splitlines()
    assert line.startswith("approxmul layers: error: model file not found: mnist-lenet")
    assert "digits-lenet, mnist-lenet5" in line


def test_bundled_model_names_and_their_file_stems(tmp_path):
    # evaluate, retrain, sweep and layers take both spellings alike
    rows = []
    for name in ("digits-lenet", "digits_lenet"):
        proc = approxmul("evaluate", "--model", name, "-m", "drum:k=4", "--limit", "60",
                         "--no-progress", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        rows.append([line.split()[:5] for line in proc.stdout.splitlines()
                     if line.startswith("drum")])  # not images/s
    assert rows[0] == rows[1] and rows[0]


def test_a_bad_spec_in_a_layer_map_names_its_layer(tmp_path):
    (tmp_path / "map.json").write_text('{"conv1": "drum:k=99", "fc2": "exact"}')
    assert_user_error(approxmul("evaluate", "--layers", "map.json", "-m", "exact", cwd=tmp_path),
                      "layer 'conv1'", "k=99")


def test_version(tmp_path):
    proc = approxmul("--version", cwd=tmp_path)  # not the source tree, which has no library
    assert proc.returncode == 0 and proc.stdout.startswith("approxmul ")
    assert proc.stdout.split()[1] == __import__("approxmul_cffi").__version__
