"""approxmul_cffi.evaluation: accuracy targets, result table, metrics, built-in multipliers."""

import csv
import io
import json

import numpy as np
import pytest

import approxmul_cffi as am
from approxmul_cffi import evaluation as ev
from approxmul_cffi import nn, quant
from approxmul_cffi.datasets import load_digits


@pytest.fixture(scope="module")
def test_data():
    return load_digits("test")


@pytest.fixture(scope="module")
def calibration():
    return load_digits("train")[0]


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("method", ["minmax", "percentile"])
def test_quantized_exact_within_one_point_of_float(test_data, calibration, signed, method):
    x, y = test_data
    model = ev.bundled_model()
    float_acc = (model.predict(x) == y).mean()
    assert float_acc >= 0.97
    q = nn.quantize(model, calibration, quant.QuantConfig(calibration=method))
    acc = (q.predict(x, am.Multiplier.exact(bits=8, signed=signed)) == y).mean()
    assert abs(acc - float_acc) <= 0.01


def test_destructive_multiplier_drops_to_chance(test_data, calibration):
    zero = am.Multiplier.from_table(np.zeros((256, 256), np.int32), signed=True)
    result = ev.evaluate(ev.bundled_model(), test_data, {"zero": zero}, progress=False,
                         calibration=calibration)
    row = result.row("zero")
    assert row.top1 < 20.0  # 10 classes: chance is 10 %
    assert row.delta_vs_exact < -75.0
    assert row.mae_percent > 5.0 and row.wce_percent == pytest.approx(16384 / 65536 * 100)
    assert result.row("exact:signed=1").kind == "exact"


def test_result_rows_and_exports(test_data, calibration, tmp_path):
    result = ev.evaluate(ev.bundled_model(), test_data, ["drum:k=3", "exact"],
                         layers={"fc2": "exact:bits=8,signed=1"}, limit=90, progress=False,
                         calibration=calibration)
    assert [(r.multiplier, r.layers, r.kind) for r in result] == [
        ("float", "all", "float"), ("exact", "all", "exact"),
        ("drum:k=3", "fc2=exact:bits=8,signed=1", "approximate"),
        ("exact", "fc2=exact:bits=8,signed=1", "approximate"),
    ]
    exact = result.row("exact")
    assert exact.delta_vs_exact == 0 and exact.mae_percent == 0 and exact.images_per_s > 0
    drum = result[2]
    assert drum.delta_vs_exact == pytest.approx(drum.top1 - exact.top1)
    assert drum.mae_percent == pytest.approx(ev.multiplier_metrics(ev.resolve_multiplier("drum:k=3"))["mae_percent"])
    rows = list(csv.DictReader(io.StringIO(result.to_csv(tmp_path / "r.csv"))))
    assert rows[2]["multiplier"] == "drum:k=3" and float(rows[2]["top1"]) == drum.top1
    assert open(tmp_path / "r.csv").read() == result.to_csv()
    data = json.loads(result.to_json(tmp_path / "r.json"))
    assert data == result.to_dicts() and data[0]["mae_percent"] is None
    table = result.format_table()
    assert table.splitlines()[0].split() == ["multiplier", "layers", "MAE%", "WCE%", "top-1%",
                                             "vs", "exact", "images/s"]
    assert "drum:k=3" in table and "fc2=exact:bits=8,signed=1" in table


def test_quantized_model_input_and_errors(test_data, calibration):
    q = nn.quantize(ev.bundled_model(), calibration)
    result = ev.evaluate(q, test_data, [], limit=10, progress=False)
    assert [r.multiplier for r in result] == ["float", "exact"]
    with pytest.raises(nn.ModelError, match="unknown layer name"):
        ev.evaluate(q, test_data, ["exact"], layers={"conv7": "exact"}, progress=False)
    with pytest.raises(nn.ModelError, match="labels must be"):
        ev.evaluate(q, (test_data[0], test_data[1][:5]), progress=False)
    with pytest.raises(nn.ModelError, match="model needs"):
        ev.evaluate(q, (test_data[0][:, 0], test_data[1]), progress=False)
    with pytest.raises(ValueError, match="booth"):
        ev.evaluate(q, test_data, ["booth:k=2"], progress=False)


def test_metrics_of_builtin_tables():
    exact = ev.multiplier_metrics(am.Multiplier.exact(bits=8, signed=True))
    assert exact == {"mae_percent": 0.0, "wce_percent": 0.0}
    # truncation drops partial products a_i b_j 2^(i+j), i+j < 4: worst case all of them
    trunc = ev.multiplier_metrics(ev.resolve_multiplier("truncated:bits=8,cut=4"))
    assert trunc["wce_percent"] == pytest.approx(49 / 65536 * 100)
    assert trunc["mae_percent"] == pytest.approx(49 / 4 / 65536 * 100)


def test_pareto_front_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    rows = ev.EvalResult([ev.EvalRow("float", "all", None, None, 99.0, None, 1.0, "float")] + [
        ev.EvalRow(n, "all", mae, 0.0, top1, 0.0, 1.0, "approximate")
        for n, mae, top1 in [("a", 0.0, 99), ("b", 0.5, 99), ("c", 1.0, 80), ("d", 2.0, 90)]])
    assert [r.multiplier for r in ev.pareto_front(rows)] == ["b", "d"]
    ev.plot_accuracy(rows, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_package_level_api():
    import approxmul_cffi
    assert approxmul_cffi.nn is nn and approxmul_cffi.quant is quant
    result = approxmul_cffi.evaluate(ev.bundled_model(), load_digits("test"), [], limit=5,
                                     progress=False)
    assert [r.kind for r in result] == ["float", "exact"]


def test_network_benchmark_smoke(tmp_path):
    """A tiny run of benchmarks/bench_network.py so it cannot rot (not a timing test)."""
    import pathlib
    import subprocess
    import sys
    script = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "bench_network.py"
    if not script.exists():
        pytest.skip("benchmarks/ not present (installed package only)")
    proc = subprocess.run([sys.executable, str(script), "--threads", "1", "--images", "64",
                           "--batch", "32", "--repeat", "1", "--json", str(tmp_path / "b.json")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["images"] == 64 and doc["images_per_s"]["approx_table"] > 0
    assert "approx_table" in proc.stdout
