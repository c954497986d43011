"""`approxmul sweep --model` takes the bundled names `approxmul evaluate` takes, and runs a
bundled model on its own data set; a sweep whose every task failed does not exit 0.

Figures are checked with the serial evaluator (`approxmul evaluate`).
"""

from support import approxmul, assert_user_error, read_csv

from approxmul_cffi.evaluation import BUNDLED_MODELS, bundled_model, bundled_name, model_file
from approxmul_cffi.sweep import load_model
from approxmul_cffi.sweep.run import default_dataset


def sweep_drum4(model, limit, cwd, *more):
    """`approxmul sweep -m drum:k=4` of the model on its first samples: one worker, store s.sqlite."""
    return approxmul("sweep", "-m", "drum:k=4", "--model", model, "--limit", str(limit),
                     "--store", "s.sqlite", "--workers", "1", "--no-progress", *more, cwd=cwd)


def test_names_and_aliases():
    assert list(BUNDLED_MODELS) == ["digits-lenet", "mnist-lenet5"]
    for name, alias in (("digits-lenet", "digits_lenet"), ("mnist-lenet5", "mnist_lenet5")):
        assert bundled_name(name) == bundled_name(alias) == name
        assert model_file(name) == model_file(alias)
        assert load_model(alias).input_shape == load_model(name).input_shape
    assert load_model("mnist-lenet5").input_shape == (1, 28, 28)
    assert bundled_model("mnist_lenet5").input_shape == (1, 28, 28)
    assert default_dataset("mnist_lenet5") == default_dataset("mnist-lenet5") == "mnist"
    assert default_dataset("digits-lenet") == default_dataset(None) == "digits"


def test_mnist_by_its_evaluate_name_runs_on_mnist(tmp_path):
    sweep = sweep_drum4("mnist-lenet5", 40, tmp_path, "--csv", "sweep.csv")
    assert sweep.returncode == 0, sweep.stderr
    row, = read_csv(tmp_path / "sweep.csv")
    assert row["status"] == "ok", row["error"]
    serial = approxmul("evaluate", "-m", "drum:k=4", "--model", "mnist-lenet5", "--limit", "40",
                       "--csv", "serial.csv", "--no-progress", cwd=tmp_path)
    assert serial.returncode == 0, serial.stderr
    want = {r["multiplier"]: r for r in read_csv(tmp_path / "serial.csv")}
    assert row["top1"] == want["drum:k=4"]["top1"]
    assert row["exact_top1"] == want["exact"]["top1"]
    # the underscore spelling is the same model on the same data: the same task key
    again = sweep_drum4("mnist_lenet5", 40, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "0 of 1 tasks to run (1 already in the store)" in again.stderr


def test_digits_names_share_a_store(tmp_path):
    first = sweep_drum4("digits_lenet", 30, tmp_path)
    assert first.returncode == 0, first.stderr
    second = sweep_drum4("digits-lenet", 30, tmp_path)
    assert second.returncode == 0, second.stderr
    assert "0 of 1 tasks to run (1 already in the store)" in second.stderr


def test_an_unknown_model_lists_the_bundled_names(tmp_path):
    proc = approxmul("sweep", "-m", "drum:k=4", "--model", "mnist-lenet", "--store", "s.sqlite",
                     cwd=tmp_path)
    assert_user_error(proc, "model file not found: mnist-lenet", "digits-lenet, mnist-lenet5")
    assert not (tmp_path / "s.sqlite").exists()


def test_data_that_does_not_fit_the_model_is_refused_before_running(tmp_path):
    # a model file (not bundled) runs on the digits by default: MNIST's LeNet-5 does not fit
    bundled_model("mnist-lenet5").save(tmp_path / "mine")
    proc = approxmul("sweep", "-m", "drum:k=4", "--model", "mine.json", "--store", "s.sqlite",
                     "--limit", "20", "--workers", "1", cwd=tmp_path)
    assert_user_error(proc, "digits held-out split", "(N, 1, 28, 28)", "--data")
    assert not (tmp_path / "s.sqlite").exists()


def test_a_sweep_whose_every_task_failed_does_not_exit_0(tmp_path):
    # 8-bit multipliers on a network quantized to 6 bits: every task fails on its worker
    proc = approxmul("sweep", "-m", "drum:k=4", "-m", "mitchell", "--bits", "6", "--limit", "20",
                     "--store", "s.sqlite", "--workers", "1", "--no-progress", "--csv", "o.csv",
                     cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("approxmul sweep: error: every task failed (2)"), proc.stderr
    assert "6-bit codes" in last
    rows = read_csv(tmp_path / "o.csv")  # the table with the errors is still written
    assert [r["status"] for r in rows] == ["failed", "failed"]
