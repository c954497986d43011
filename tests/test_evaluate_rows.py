"""evaluate: every requested multiplier has its row, labels are checked, results say what ran."""

import csv
import hashlib
import io
import json
import os

import numpy as np
import pytest

import approxmul_cffi as am
from approxmul_cffi import evaluation as ev
from approxmul_cffi import nn
from approxmul_cffi.datasets import load_digits


@pytest.fixture(scope="module")
def data():
    x, y = load_digits("test")
    return x[:60], y[:60]


def run(data, multipliers, **kwargs):
    return ev.evaluate(ev.BUNDLED_MODEL, data, multipliers, progress=False, **kwargs)


def test_requested_exact_multipliers_are_not_replaced_by_the_baseline(data, tmp_path):
    am.Multiplier.exact(bits=8).save(tmp_path / "exact.bin")
    table_file = str(tmp_path / "exact.bin")
    result = run(data, ["exact", table_file, "exact:bits=8,signed=1"])
    assert [(r.multiplier, r.kind) for r in result] == [
        ("float", "float"), ("exact", "exact"), ("exact:signed=1", "exact"),
        (table_file, "approximate")]
    assert result[3].top1 == result[1].top1 and result[3].spec.startswith("file:")
    # one network has one width: mixed widths are an error naming them, not a silent swap
    for spec, bits in (("exact:bits=12", 12), ("exact:bits=4", 4)):
        with pytest.raises(nn.ModelError, match=rf"drum:k=4: 8 bits, {spec}: {bits} bits"):
            run(data, ["drum:k=4", spec])
        with pytest.raises(nn.ModelError, match=rf"multiplier '{spec}': .*8-bit codes, got a "
                                                rf"multiplier of {bits} bits"):
            run(data, [spec], bits=8)


def test_the_width_follows_the_multipliers(data):
    result = run(data, ["drum:bits=6,k=3", "exact:bits=6,signed=1"])
    assert [(r.multiplier, r.kind) for r in result] == [
        ("float", "float"), ("exact:bits=6", "exact"), ("exact:bits=6,signed=1", "exact"),
        ("drum:bits=6,k=3", "approximate")]
    assert result[1].top1 == result[2].top1 > 90   # both domains, one grid
    defaults = run(data, None, bits=4)
    assert [r.multiplier for r in defaults][1:] == ["exact:bits=4", *ev.default_multipliers(4)]


def test_mixed_rows_say_what_mae_means(data):
    mixed = run(data, ["drum:k=4"], layers={"conv1": "exact"}).format_table()
    assert "MAE%/WCE%: of the row's multiplier" in mixed.splitlines()[-1]
    plain = run(data, ["drum:k=4"]).format_table()
    assert "MAE%/WCE%" not in plain.splitlines()[-1]


@pytest.mark.parametrize("bad, shown", [(10, "10"), (-1, "-1"), (12, "12")])
def test_labels_outside_the_classes_are_refused(data, bad, shown):
    x, y = data
    y = y.copy()
    y[7] = bad
    with pytest.raises(nn.ModelError, match=rf"labels: {shown} outside the model's 10 classes"):
        run((x, y), ["exact"])


def test_exports_identify_the_run(data, tmp_path):
    table = am.multiplier("drum:k=3").table()
    unnamed = am.Multiplier.from_table(table)  # no spec: identified by its table
    result = run(data, {"drum": "drum:k=4", "unnamed": unnamed}, data_source="digits[:60]")
    rows = json.loads(result.to_json())
    row = {r["multiplier"]: r for r in rows}
    assert row["drum"]["spec"] == "drum:bits=8,signed=0,k=4"
    want = hashlib.sha256(np.asarray(table, dtype=np.int32).tobytes()).hexdigest()
    assert row["unnamed"]["spec"] == "table-sha256:" + want
    model_files = [ev.BUNDLED_MODEL, ev.BUNDLED_MODEL[:-5] + ".npz"]
    digest = hashlib.sha256(b"".join(open(p, "rb").read() for p in model_files)).hexdigest()
    x, y = data
    assert all(r["model"] == os.path.abspath(ev.BUNDLED_MODEL) for r in rows)
    assert all(r["model_sha256"] == digest for r in rows)
    assert rows[0]["data"] == "digits[:60]" and rows[0]["samples"] == 60
    assert rows[0]["data_sha256"] == hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()
    facts = am.info()
    assert rows[0]["library_version"] == am.__version__ and rows[0]["isa"] == facts["isa"]
    assert rows[0]["threads"] == am.get_num_threads()
    header = next(csv.reader(io.StringIO(result.to_csv())))
    for key in ("spec", "model_sha256", "data_sha256", "samples", "library_version", "isa",
                "threads"):
        assert key in header


def test_short_passes_are_timed_again_and_the_fastest_counts():
    # a pass long enough is timed once: no repeat
    calls = []
    assert ev._best_pass(ev.MIN_TIMED_SECONDS, lambda: calls.append(1)) == ev.MIN_TIMED_SECONDS
    assert calls == []
    # a short first pass (slowed by a hiccup) is repeated until MIN_TIMED_SECONDS
    # of passes, and the fastest pass is the result
    durations = iter([0.01] * 100)

    def run_pass():
        import time
        time.sleep(next(durations))

    slow_first = ev.MIN_TIMED_SECONDS / 2
    best = ev._best_pass(slow_first, run_pass)
    assert 0.01 <= best < slow_first
    # passes are capped even when each is instantaneous
    count = []
    ev._best_pass(0.0, lambda: count.append(1))
    assert len(count) == ev.MAX_TIMED_PASSES - 1


def test_images_per_second_repeats_within_20_percent():
    # the complaint: the same row's images/s varied 2.8k..157k between identical
    # runs; rows now come from the fastest of several passes
    x, y = load_digits("test")
    model = ev.bundled_model()
    speeds = [ev.evaluate(model, (x[:200], y[:200]), ["drum:k=4"], progress=False,
                          calibration=load_digits("train")[0][:200])[-1].images_per_s
              for _ in range(3)]
    # loose (shared CI machines, sanitizers): the swing reported was 50x; the idle-machine
    # spread (+-6 % over 5 CLI runs) is in docs/benchmarks.md
    assert max(speeds) / min(speeds) < 3.0


def test_bias_correction_rows_each_corrected_for_their_multiplier(data):
    x, y = data
    calibration = load_digits("train")[0][:300]
    qmodel = nn.quantize(nn.load(ev.BUNDLED_MODEL), calibration)
    specs = ["truncated:bits=8,cut=10", "drum:k=3"]
    result = ev.evaluate(qmodel, data, specs, calibration=calibration, progress=False,
                         bias_correction=True)
    assert result.to_dicts()[-1]["bias_correction"] is True          # the export says so
    assert "bias_correction" not in ev.evaluate(qmodel, data, specs[:1], progress=False).run
    assert all(qmodel.layer(n).correction(am.multiplier(s)) is None   # left as it came
               for n in qmodel.layer_names for s in specs)
    for spec in specs:
        fresh = nn.quantize(nn.load(ev.BUNDLED_MODEL), calibration)
        plain = (fresh.predict(x, spec) == y).mean() * 100
        fresh.correct_bias(calibration, spec)
        corrected = (fresh.predict(x, spec) == y).mean() * 100
        assert result.row(spec).top1 == pytest.approx(corrected, abs=1e-9)
        assert corrected > plain + 10
