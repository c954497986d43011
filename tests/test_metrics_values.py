"""Error metrics: hand enumeration at 4 bits, NumPy over all 8-bit pairs,
and the regression figures of docs/multipliers.md."""

import numpy as np
import pytest

import approxmul_cffi as am

SPECS = ["drum:bits=4,k=2", "mitchell:bits=4,signed=1", "truncated:bits=4,cut=3,correct=1",
         "roba:bits=4", "bam:bits=4,hbl=1,vbl=3"]


def by_hand(m):
    """The definitions of docs/metrics.md, one pair at a time."""
    low, high = m.operand_range
    errors, relative = [], []
    for a in range(low, high + 1):
        for b in range(low, high + 1):
            e = m.product(a, b) - a * b
            errors.append(e)
            if a * b != 0:
                relative.append(abs(e) / abs(a * b))
    n, norm = len(errors), 4 ** m.bits
    mean = sum(errors) / n
    mse = sum(e * e for e in errors) / n
    return {
        "mae": sum(map(abs, errors)) / n, "mae_percent": 100 * sum(map(abs, errors)) / n / norm,
        "mse": mse, "wce": max(map(abs, errors)), "wce_percent": 100 * max(map(abs, errors)) / norm,
        "wcre_percent": 100 * max(relative), "mre_percent": 100 * sum(relative) / len(relative),
        "ep_percent": 100 * sum(e != 0 for e in errors) / n, "bias": mean,
        "error_std": (mse - mean * mean) ** 0.5, "min_error": min(errors), "max_error": max(errors),
        "pairs": n, "zero_product_pairs": n - len(relative),
    }


@pytest.mark.parametrize("spec", SPECS)
def test_4_bit_by_hand(spec):
    m = am.multiplier(spec)
    got, want = m.metrics(), by_hand(m)
    assert set(got) == set(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-12), key


def test_worked_2_bit_values():
    # 2-bit unsigned, exact except 3 * 3 -> 8: one error of -1 among 16 pairs
    m = am.Multiplier.from_table([[0, 0, 0, 0], [0, 1, 2, 3], [0, 2, 4, 6], [0, 3, 6, 8]])
    got = m.metrics()
    assert got["mae"] == 1 / 16 and got["mae_percent"] == 100 / 16 / 16 and got["wce"] == 1
    assert got["ep_percent"] == 6.25 and got["zero_product_pairs"] == 7
    assert got["mre_percent"] == pytest.approx(100 / 9 / 9)  # (1/9) over 9 nonzero products
    assert got["wcre_percent"] == pytest.approx(100 / 9)


@pytest.mark.parametrize("spec", ["drum:k=4,signed=1", "ilm:iterations=1", "roba:signed=1",
                                  "truncated:cut=8,correct=1"])
def test_8_bit_against_numpy(spec):
    m = am.multiplier(spec)
    low, high = m.operand_range
    v = np.arange(low, high + 1)
    p = v & 255
    exact = np.outer(v, v)
    e = m.table()[np.ix_(p, p)].astype(np.int64) - exact
    nz = exact != 0
    got = m.metrics()
    assert got["mae"] == np.abs(e).mean() and got["mse"] == (e.astype(float) ** 2).mean()
    assert got["mae_percent"] == pytest.approx(100 * np.abs(e).mean() / 65536, rel=1e-14)
    assert got["wce"] == np.abs(e).max() and got["bias"] == e.mean()
    assert got["ep_percent"] == 100 * (e != 0).mean()
    assert got["mre_percent"] == pytest.approx(100 * (np.abs(e[nz]) / np.abs(exact[nz])).mean(), rel=1e-12)
    assert got["wcre_percent"] == pytest.approx(100 * (np.abs(e[nz]) / np.abs(exact[nz])).max())
    assert got["error_std"] == pytest.approx(e.std(), rel=1e-12)
    emap = m.error_map()
    assert emap.dtype == np.int64 and np.array_equal(emap[np.ix_(p, p)], e)


# n = 8 regression values (docs/multipliers.md): MAE, WCE, MRE%, EP%, bias
REGRESSION = {
    "truncated:cut=8": (448.25, 1793, 9.78, 98.05, -448.25),
    "truncated:cut=8,correct=1": (200.03, 1345, 17.72, 100.00, -0.25),
    "drum:k=4": (925.86, 7425, 5.89, 97.72, 119.75),
    "drum:k=6": (232.83, 2000, 1.30, 85.43, 95.77),
    "dsm:m=4": (1211.69, 7425, 6.86, 95.85, -1211.69),
    "mitchell": (606.40, 4096, 3.79, 93.09, -606.40),
    "ilm:iterations=1": (188.63, 3969, 0.83, 73.18, -188.63),
    "roba": (455.06, 4096, 2.86, 93.09, -0.25),
}


@pytest.mark.parametrize("spec", REGRESSION)
def test_8_bit_regression_figures(spec):
    mae, wce, mre, ep, bias = REGRESSION[spec]
    got = am.multiplier(spec).metrics()
    assert round(got["mae"], 2) == mae and got["wce"] == wce
    assert round(got["mre_percent"], 2) == mre and round(got["ep_percent"], 2) == ep
    assert round(got["bias"], 2) == pytest.approx(bias, abs=0.01)


def test_exact_and_thread_independence():
    assert am.multiplier("exact:bits=12,signed=1").metrics()["wce"] == 0
    m = am.multiplier("drum:bits=11,k=3")  # 2^22 pairs through the function path
    am.set_num_threads(1)
    try:
        one = m.metrics()
    finally:
        am.set_num_threads(0)
    am.set_num_threads(2)
    try:
        assert m.metrics() == one
    finally:
        am.set_num_threads(0)


def test_error_map_limits():
    with pytest.raises(am.UnsupportedError, match="at most 12 bits"):
        am.multiplier("exact:bits=13").error_map()
