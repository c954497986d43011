"""Every instruction set this CPU runs gives the generic path's results, bit for bit.

The instruction set is chosen once per process, so each one runs the same
battery in a subprocess (APPROXMUL_ISA=...) and the results are compared
here with each other and with the NumPy reference.
"""

import json

import numpy as np
import pytest

import approxmul_cffi as am
from reference import product_matmul
from support import cpu_features, supported_isas

BATTERY = r"""
import json, sys
import numpy as np
import approxmul_cffi as am
sys.path.insert(0, {tests!r})
from kernel_cases import cases
out = {{}}
only = {only!r}
for name, mult, a, b, za, zb, threads in cases():
    if only and mult.plan != only:
        continue
    am.set_num_threads(threads)
    out[name] = [mult.plan, am.matmul(a, b, mult, a_zero_point=za, b_zero_point=zb).tolist()]
from kernel_cases import requantize_cases
from approxmul_cffi import quant
for name, args, kw in ([] if only else requantize_cases()):
    out[name] = ["requantize", quant.requantize(*args, **kw).tolist()]
    real = quant.requantize(*args, **kw, real=(0.37, "float32"))
    out[name + " real"] = ["requantize", real.tolist()]
from kernel_cases import stage_cases
for name, x, w, m, conv, args, kw in ([] if only else stage_cases()):
    got = quant.conv2d_requantize(x, w, m, *args, **conv, **kw)
    out[name] = ["stage", repr(got.tolist())]
from kernel_cases import affine_cases
from approxmul_cffi import affine
for name, kind, args, kw in ([] if only else affine_cases()):
    # repr keeps float32 values exact and tells -0.0 from 0.0
    out[name] = ["affine", repr(getattr(affine, kind)(*args, **kw).tolist())]
from kernel_cases import nonfinite_cases
for name, x in ([] if only else nonfinite_cases()):
    try:
        out[name] = ["affine", affine.quantize(x, 0.01, 0, -128, 127, finite=True).tolist()]
    except ValueError as error:
        out[name] = ["affine", str(error)]
from kernel_cases import real_input_cases
for name, x, call, grid in ([] if only else real_input_cases()):
    try:  # approxmul_conv2d_real: quantizing and refusing in one pass
        out[name] = ["real input", repr(call.run_real(x, *grid).tolist())]
    except ValueError as error:
        out[name] = ["real input", str(error)]
print(json.dumps({{"isa": am.info()["isa"], "results": out}}))
"""


def test_detected_features_match_the_cpu():
    assert am.info()["cpu_features"].split(",") == cpu_features() or \
        (am.info()["cpu_features"] == "none" and not cpu_features())


def run_battery(python_runner, isa, only="", env=None):
    from support import ROOT
    result = python_runner(BATTERY.format(tests=str(ROOT / "tests"), only=only),
                           env={"APPROXMUL_ISA": isa, **(env or {})}, timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["isa"] == isa
    return data["results"]


@pytest.fixture(scope="module")
def battery_results():
    from support import run_python
    return {isa: run_battery(run_python, isa) for isa in supported_isas()}


def test_every_isa_matches_generic_and_numpy(battery_results):
    from kernel_cases import cases, products
    product = products()
    expected = {name: (product[name.rsplit("-", 1)[0]], a, b, za, zb)
                for name, _, a, b, za, zb, _ in cases()}
    generic = battery_results["generic"]
    for isa, results in battery_results.items():
        assert results.keys() == generic.keys()
        for name, (plan, values) in results.items():
            assert values == generic[name][1], f"{isa} differs from generic on {name} ({plan})"
    from kernel_cases import requantize_cases
    from test_requantize import plain_requantize
    for name, args, kw in requantize_cases():
        want = plain_requantize(*args, **kw)
        np.testing.assert_array_equal(np.array(generic[name][1]).reshape(want.shape), want,
                                      err_msg=name)
        # the fused output stage: the codes' real values, 0.37 (code - zero point)
        real = (0.37 * (want.astype(np.float64) - args[4])).astype(np.float32)
        got = np.array(generic[name + " real"][1], np.float32).reshape(real.shape)
        np.testing.assert_array_equal(got, real, err_msg=name)
    from approxmul_cffi import quant
    from kernel_cases import stage_cases
    for name, x, w, m, conv, args, kw in stage_cases():
        # conv2d, then the NumPy statement of the requantization (then scale (code - zero point))
        codes = quant.requantize_reference(am.conv2d(x, w, m, **conv), *args,
                                           signed=bool(m.signed), rounding=kw["rounding"],
                                           bits=kw["bits"])
        if kw["real"] is None:
            want = codes
        else:
            scale, real = kw["real"]
            want = (scale * (codes.astype(np.float64) - args[3])).astype(real)
        assert generic[name][1] == repr(want.tolist()), name
    from approxmul_cffi import affine
    from kernel_cases import nonfinite_cases
    for name, x in nonfinite_cases():
        bad = np.flatnonzero(~np.isfinite(x))
        if not bad.size:
            assert generic[name][1] == affine.quantize(x, 0.01, 0, -128, 127).tolist(), name
        else:
            kind = "NaN" if np.isnan(x[bad[0]]) else "infinite"
            assert generic[name][1].startswith(f"x[{bad[0]}] is {kind}"), name
    from kernel_cases import real_input_cases
    for name, x, call, grid in real_input_cases():
        bad = np.flatnonzero(~np.isfinite(x.ravel()))
        if bad.size:
            kind = "NaN" if np.isnan(x.flat[bad[0]]) else "infinite"
            assert generic[name][1].startswith(f"x[{bad[0]}] is {kind}"), name
        else:  # the codes path: quantize_finite, then the fused conv2d
            codes = affine.quantize(x, grid[0], call._zero_points[0], *grid[1:3],
                                    dtype=grid[3], finite=True)
            assert generic[name][1] == repr(call(codes).tolist()), name
    from kernel_cases import affine_cases
    for name, kind, args, kw in affine_cases():
        reference = getattr(affine, kind + "_reference")
        if kind == "dequantize":
            want = np.asarray(reference(*args, axis=kw["axis"])).astype(kw["dtype"])
        else:
            want = reference(*args, **kw)
        assert generic[name][1] == repr(want.tolist()), name
    for name, (product, a, b, za, zb) in expected.items():
        reference = product_matmul(product, a, b, za, zb)
        np.testing.assert_array_equal(np.array(generic[name][1]).reshape(reference.shape),
                                      reference, err_msg=name)


@pytest.mark.parametrize("order", ["product", "stationary"])
def test_table_orders_match_generic(battery_results, order):
    """Both table kernels (product-table and weight-stationary order), forced
    on every shape, give the generic results, bit for bit."""
    from support import run_python
    generic = battery_results["generic"]
    for isa in supported_isas()[1:]:
        # the low-nibble-error tables too, kept off exact-plus-table
        results = run_battery(run_python, isa, only="table",
                              env={"APPROXMUL_TABLE_ORDER": order, "APPROXMUL_NIBBLE_ERRORS": "0"})
        assert any(name.startswith("nibble-error-") for name in results), "no table-plan cases"
        for name, (plan, values) in results.items():
            assert values == generic[name][1], f"{isa} ({order} order) differs on {name}"


def test_long_factorizations_match_generic(battery_results):
    """Factorizations of up to rank 8 run as exact GEMMs when forced, on
    every set, though a set's plan may prefer the table kernel (or exact plus
    a nibble table) for them."""
    from support import run_python
    generic = battery_results["generic"]
    for isa in supported_isas()[1:]:
        results = run_battery(run_python, isa, only="factorized-gemm",
                              env={"APPROXMUL_MAX_FACTORIZED_RANK": "8",
                                   "APPROXMUL_NIBBLE_ERRORS": "0"})
        assert any(name.startswith("trunc4-") for name in results)  # rank 5
        assert any(name.startswith("trunc6-") for name in results)  # rank 7
        for name, (plan, values) in results.items():
            assert values == generic[name][1], f"{isa} (factorized) differs on {name}"


def test_battery_covers_every_plan(battery_results):
    plans = {plan for plan, _ in battery_results["generic"].values()}
    assert plans == {"exact-gemm", "factorized-gemm", "table", "exact-plus-table", "function",
                     "requantize", "affine", "stage", "real input"}


def test_forced_isa_reported(python_runner):
    result = python_runner("import approxmul_cffi as am; print(am.info()['isa'])",
                           env={"APPROXMUL_ISA": "generic"})
    assert result.returncode == 0 and result.stdout.strip() == "generic"


@pytest.mark.parametrize("value", ["avx1024", "neon"])
def test_forced_unknown_isa_errors_cleanly(python_runner, value):
    code = ("import numpy as np, approxmul_cffi as am\n"
            "info = am.info()\n"
            "print(info['isa'], '|', info['isa_error'])\n"
            "try:\n"
            "    am.matmul(np.ones((2, 2), np.uint8), np.ones((2, 2), np.uint8),"
            " am.Multiplier.exact(8))\n"
            "except am.UnsupportedError as e:\n"
            "    print('raised', e)\n")
    result = python_runner(code, env={"APPROXMUL_ISA": value})
    assert result.returncode == 0, result.stderr
    assert "unavailable" in result.stdout and "raised" in result.stdout
    assert value in result.stdout


@pytest.mark.parametrize("isa, hidden", [("avx2", "avx2"), ("avx512", "avx512vbmi"),
                                         ("avx512", "avx512vnni,avx512dq"),
                                         ("avx512amx", "amx-int8"), ("avx512amx", "avx512vbmi")])
def test_forcing_an_isa_the_cpu_lacks_errors_cleanly(python_runner, isa, hidden):
    # APPROXMUL_HIDE_CPU_FEATURES makes any CPU lack them (test-only)
    code = ("import numpy as np, approxmul_cffi as am\n"
            "info = am.info()\n"
            "print(info['isa'], '|', info['cpu_features'])\n"
            "try:\n"
            "    am.matmul(np.ones((2, 2), np.uint8), np.ones((2, 2), np.uint8),"
            " am.Multiplier.exact(8))\n"
            "except am.UnsupportedError as e:\n"
            "    print('raised', e)\n")
    result = python_runner(code, env={"APPROXMUL_ISA": isa, "APPROXMUL_HIDE_CPU_FEATURES": hidden})
    assert result.returncode == 0, result.stderr
    first, message = result.stdout.split("\n", 1)
    assert first.split(" | ")[0] == "unavailable"
    assert not set(hidden.split(",")) & set(first.split(" | ")[1].split(","))
    assert message.startswith(f"raised APPROXMUL_ISA={isa}: this CPU lacks it"), message


def test_hidden_features_pick_the_next_best_set(python_runner):
    code = "import approxmul_cffi as am; print(am.info()['isa'])"
    for hidden, best in (("avx512vbmi", "avx2"), ("avx2,avx512f", "generic")):
        if best not in supported_isas():
            continue  # only a set this CPU has can be the next best
        result = python_runner(code, env={"APPROXMUL_HIDE_CPU_FEATURES": hidden})
        assert result.returncode == 0 and result.stdout.strip() == best, result.stderr


def test_info_reports_kernels():
    # the best set the CPU supports, judged from the CPU's own flags
    info = am.info()
    assert info["isa"] == supported_isas()[-1]
    names = {"generic": "generic.cpp", "avx2": "AVX2", "avx512": "AVX-512", "avx512amx": "AVX-512"}
    assert names[info["isa"]] in info["kernel.exact-gemm"]
    # 8-bit exact and factorized plans: AMX tiles, vpdpbusd, or the int16 GEMM
    byte_gemm = {"avx512": "vpdpbusd", "avx512amx": "AMX tiles"}.get(info["isa"], "none")
    assert info["kernel.byte-gemm"].startswith(byte_gemm), info["kernel.byte-gemm"]
    assert info["kernel.function"] == ("tiled reference, one model call per product or per "
                                       "outer-product step; C models: one dot-loop call per "
                                       "output and block; Mitchell and ILM: GEMM blocks in "
                                       "int64 vector lanes")
