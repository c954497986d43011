"""approxmul retrain: accuracy rises, the weights load in evaluate, mistakes exit 2."""

import json

import numpy as np
import pytest
import torch

from approxmul_cffi.cli import main
from approxmul_cffi.datasets import load, load_digits
from approxmul_cffi.evaluation import bundled_model, evaluate
from approxmul_cffi.torch.graph import to_torch
from approxmul_cffi.torch.training import retrain


def test_cli_retrain_improves_and_writes_weights_evaluate_reads(tmp_path, capsys):
    out, report = tmp_path / "tuned", tmp_path / "r.json"
    rc = main(["retrain", "-m", "drum:k=3", "--epochs", "2", "--threads", "2", "--no-progress",
               "--no-bias-correction", "--out", str(out), "--json", str(report)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "before:" in text and "epoch   2:" in text and "after:" in text
    assert "no bias correction" in text
    result = json.loads(report.read_text())
    assert set(result) == {"before", "epochs", "after"} and len(result["epochs"]) == 2
    assert result["before"] == pytest.approx(22.888888, abs=1e-4)   # evaluate's figure
    assert result["after"] > result["before"] + 30
    x, y = load_digits("test")
    row = evaluate(str(out) + ".json", (x, y), ["drum:k=3"], calibration=load_digits("train")[0],
                   progress=False).row("drum:k=3")
    assert row.top1 == pytest.approx(result["after"], abs=1e-9)     # the same model, both ways


def test_bias_correction_retrains_truncation_and_evaluate_agrees(tmp_path, capsys):
    out, report = tmp_path / "tuned", tmp_path / "r.json"
    spec = "truncated:bits=8,cut=10"
    assert main(["retrain", "-m", spec, "--epochs", "2", "--threads", "2",   # on by default
                 "--no-progress", "--out", str(out), "--json", str(report)]) == 0
    result = json.loads(report.read_text())
    assert "(evaluate it with --bias-correction)" in capsys.readouterr().out
    assert result["before"] == pytest.approx(36.222222, abs=1e-4)   # evaluate --bias-correction
    assert result["after"] > 85
    x, y = load_digits("test")
    kwargs = dict(calibration=load_digits("train")[0], progress=False)
    row = evaluate(str(out) + ".json", (x, y), [spec], bias_correction=True, **kwargs).row(spec)
    assert row.top1 == pytest.approx(result["after"], abs=1e-9)
    plain = evaluate(str(out) + ".json", (x, y), [spec], **kwargs).row(spec)
    assert plain.top1 < result["after"] - 20    # the weights rely on the correction


@pytest.mark.parametrize("gradient", ["table", "table2d"])
def test_table_gradients_retrain(gradient):
    torch.manual_seed(0)
    train, test = load_digits("train"), load_digits("test")
    result = retrain(to_torch(bundled_model()), "drum:k=3", train, test, epochs=1,
                     gradient=gradient, progress=False, bias_correction=False)
    assert result["after"] > result["before"] + 20


def test_per_layer_multipliers(tmp_path):
    report = tmp_path / "r.json"
    rc = main(["retrain", "-m", "exact", "--layer", "conv2=drum:k=3", "--epochs", "1",
               "--no-progress", "--json", str(report)])
    assert rc == 0
    assert json.loads(report.read_text())["before"] > 30   # only conv2 approximate


@pytest.mark.parametrize("argv, message", [
    (["--layer", "conv9=drum:k=3"], "unknown layer name(s) 'conv9'"),
    (["--epochs", "0"], "--epochs must be at least 1"),
    (["--model", "nope.json"], "nope.json"),
    (["-m", "nosuch:k=1"], "unknown multiplier family"),
    # output paths are checked before the training, not after it
    (["--out", "tuned", "--json", "tuned.json"], "--out and --json both write tuned.json"),
    (["--out", "tuned", "--json", "tuned.npz"], "--out (weights) and --json both write tuned.npz"),
    (["--out", "no-such-folder/tuned"], "--out no-such-folder/tuned.json: folder no-such-folder "
                                        "does not exist"),
    (["--json", "no-such-folder/acc.json"], "folder no-such-folder does not exist"),
])
def test_cli_mistakes(argv, message, capsys):
    spec = [] if "-m" in argv else ["-m", "drum:k=3"]
    assert main(["retrain", "--no-progress"] + spec + argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_mnist_lenet5_is_bundled_and_its_torch_twin_agrees():
    model = bundled_model("mnist-lenet5")
    x, y = load("mnist", "test")
    assert x.shape == (1000, 1, 28, 28) and load("mnist", "train")[0].shape == (4000, 1, 28, 28)
    net = to_torch(model)
    with torch.no_grad():
        out = net(torch.from_numpy(x[:200])).numpy()
    np.testing.assert_allclose(out, model.forward(x[:200]), atol=1e-4)
    assert (model.predict(x) == y).mean() >= 0.97
    result = evaluate(model, (x, y), [], calibration=load("mnist", "train")[0], progress=False)
    assert result.row("exact").top1 >= 97.0
