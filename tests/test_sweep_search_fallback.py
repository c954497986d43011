"""The search strategy finds an assignment within the budget whenever one was measured.

Regression tests: with `-m exact -m drum:k=4` every layer alone with DRUM(4)
loses 0 points while DRUM(4) everywhere loses 4, and the search used to give
up: it pruned exact from every layer (DRUM(4) ties it on the estimated drop
at a lower cost), halved its estimate limit about 20 times for the same one
candidate, and never fell back on what the sensitivity table had measured.
Every figure is checked with the serial evaluator.
"""

import csv
import json

import pytest
from support import approxmul, write_costs

from approxmul_cffi.datasets import load_digits
from approxmul_cffi.evaluation import bundled_model, evaluate
from approxmul_cffi.sweep import beam_search, pareto_options, sweep

LAYERS = ["conv1", "conv2", "fc1", "fc2"]
COSTS = {"exact": 1.0, "drum:k=4": 0.33, "drum:k=3": 0.22}


def serial_top1(assignment, limit):
    """(top-1 of the assignment, top-1 of the exact network), by the serial evaluator."""
    result = evaluate(bundled_model(), load_digits("test"), {"x": "exact"}, layers=assignment,
                      limit=limit, calibration=load_digits("train")[0], progress=False)
    return result[-1].top1, result.row("exact").top1


def beam_rounds(logs):
    return [line for line in logs if "candidates with estimated drop" in line]


# ---------------------------------------------------------------------------
# The pieces


def test_options_tied_on_the_estimated_drop_are_kept():
    # exact and DRUM(4) both lose 0 points alone: the tie says nothing about them together
    assert pareto_options([(1.0, 0.0, "exact"), (0.33, 0.0, "drum:k=4")]) == [
        (0.33, 0.0, "drum:k=4"), (1.0, 0.0, "exact")]
    # beaten: no cheaper and a larger drop
    assert pareto_options([(0.33, 0.0, "a"), (0.33, 2.0, "b"), (0.5, 1.0, "c")]) == [
        (0.33, 0.0, "a")]


def test_beam_lists_every_assignment_of_zero_estimates():
    drops = {layer: {"exact": 0.0, "drum:k=4": 0.0} for layer in LAYERS}
    macs = {"conv1": 9216, "conv2": 73728, "fc1": 8192, "fc2": 640}
    listed = beam_search(drops, macs, {"exact": 1.0, "drum:k=4": 0.33}, 1.5)
    assert len(listed) == 2 ** len(LAYERS)
    assert [c for c, _, _ in listed] == sorted(c for c, _, _ in listed)
    assert listed[0][2] == dict.fromkeys(LAYERS, "drum:k=4")
    assert listed[-1][2] == dict.fromkeys(LAYERS, "exact")


# ---------------------------------------------------------------------------
# The reported case, through the command line


def test_search_finds_an_assignment_within_the_budget(tmp_path):
    write_costs(tmp_path / "costs.csv", ["exact", "drum:k=4"], COSTS)
    proc = approxmul("sweep", "-m", "exact", "-m", "drum:k=4", "--strategy", "search",
                     "--costs", "costs.csv", "--budget", "1", "--store", "x.sqlite",
                     "--limit", "150", "--workers", "2", "--no-progress", "--csv", "out.csv",
                     "--layer-map", "best.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no assignment measured" not in proc.stderr
    # the estimate limit is not halved again and again over the same candidates
    assert len(beam_rounds(proc.stderr.splitlines())) <= 2, proc.stderr
    doc = json.loads((tmp_path / "best.json").read_text())
    names = doc["names"]
    assert sorted(names) == LAYERS and set(names.values()) <= {"exact", "drum:k=4"}
    top1, exact_top1 = serial_top1(names, 150)
    assert doc["top1"] == top1 and exact_top1 - top1 <= 1.0
    # DRUM(4) everywhere misses the budget here: the case is not trivial
    everywhere, _ = serial_top1(dict.fromkeys(LAYERS, "drum:k=4"), 150)
    assert exact_top1 - everywhere > 1.0
    assert doc["cost"] < 1.0  # cheaper than exact everywhere
    # the best is the cheapest of the measured whole-network rows within the budget
    with open(tmp_path / "out.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["strategy"] == "search"]
    fitting = [float(r["power"]) for r in rows if float(r["drop"]) <= 1.0 + 1e-9]
    assert fitting and doc["cost"] == pytest.approx(min(fitting))


# ---------------------------------------------------------------------------
# When no beam candidate fits: the sensitivity table's measurements


def test_search_falls_back_on_the_sensitivity_table(client, tmp_path):
    # a beam one wide lists DRUM(4) everywhere only, which misses the budget
    logs = []
    costs = {n: {"power": COSTS[n]} for n in ("exact", "drum:k=4")}
    result = sweep(["exact", "drum:k=4"], strategy="search", costs=costs, budget=1.0,
                   limit=150, beam_width=1, store=tmp_path / "s.sqlite", client=client,
                   progress=False, log=logs.append)
    best = result.best
    assert best is not None, logs
    assert len(beam_rounds(logs)) <= 2, logs
    assert sorted(best["assignment"]) == LAYERS
    top1, exact_top1 = serial_top1(best["assignment"], 150)
    assert best["top1"] == top1 and exact_top1 - top1 <= 1.0
    assert best["cost"] < 1.0
    search_rows = [r for r in result.rows if r["strategy"] == "search"]
    assert best["cost"] == min(r["cost"] for r in search_rows if r["drop"] <= 1.0 + 1e-9)


def test_a_budget_of_0_points(client, tmp_path):
    # each layer alone with DRUM(4) loses nothing on these 150 digits, all of them together do
    costs = {n: {"power": COSTS[n]} for n in ("exact", "drum:k=4")}
    result = sweep(["exact", "drum:k=4"], strategy="search", costs=costs, budget=0.0,
                   limit=150, store=tmp_path / "s.sqlite", client=client, progress=False)
    best = result.best
    assert best is not None
    assert best["drop"] <= 1e-9 and best["cost"] < 1.0
    top1, exact_top1 = serial_top1(best["assignment"], 150)
    assert best["top1"] == top1 and top1 >= exact_top1


def test_without_exact_the_search_says_so_after_one_beam(client, tmp_path):
    logs = []
    costs = {n: {"power": COSTS[n]} for n in ("drum:k=4", "drum:k=3")}
    result = sweep(["drum:k=4", "drum:k=3"], strategy="search", costs=costs, budget=1.0,
                   limit=150, store=tmp_path / "s.sqlite", client=client, progress=False,
                   log=logs.append)
    assert result.best is None
    assert len(beam_rounds(logs)) <= 2, logs  # it used to halve the limit about 20 times
    assert "no assignment measured within 1.0 points" in logs[-1]
    assert "exact" in logs[-1]  # the way out
