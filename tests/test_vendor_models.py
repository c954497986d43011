"""Vendor C models through every supported signature, and Python callables."""

import gc
import os
import pickle

import numpy as np
import pytest
from vendor_fixture import vendor_models  # noqa: F401 (fixture)

import approxmul_cffi as am
from approxmul_cffi.errors import CallbackError, InvalidArgumentError, LibraryIOError


def values(m):
    low, high = m.operand_range
    return np.arange(low, high + 1)


def value_table(m):
    v = values(m)
    p = v & ((1 << m.bits) - 1)
    return m.table()[np.ix_(p, p)].astype(np.int64), v


@pytest.mark.parametrize("signature", ["u8", "uint16_t f(uint8_t a, uint8_t b)",
                                       "uint16_t mul8u_lowa(const uint8_t a, const uint8_t b);"])
def test_u8(vendor_models, signature):  # noqa: F811
    m = am.Multiplier.from_c_function(vendor_models, "mul8u_lowa", signature)
    t, v = value_table(m)
    assert (m.bits, m.signed) == (8, False)
    assert np.array_equal(t, np.outer(v, v) + (v[:, None] & 3))


def test_second_operand_first(vendor_models):  # noqa: F811
    m = am.Multiplier.from_c_function(vendor_models, "mul8u_ba", "uint64_t f(uint64_t b, uint64_t a)")
    t, v = value_table(m)
    assert np.array_equal(t, np.outer(v, v) + (v[:, None] & 3))  # error follows the first operand
    same = am.Multiplier.from_c_function(vendor_models, "mul8u_ab", "u64")
    assert np.array_equal(same.table(), m.table())
    # declaring the wrong order shows up as the transposed table
    wrong = am.Multiplier.from_c_function(vendor_models, "mul8u_ba", "u64")
    assert np.array_equal(wrong.table(), m.table().T)


def test_s8(vendor_models):  # noqa: F811
    m = am.Multiplier.from_c_function(vendor_models, "mul8s_floor4", "int16_t f(int8_t a, int8_t b)")
    t, v = value_table(m)
    assert m.signed and np.array_equal(t, np.outer(v, v) & ~3)


def test_signed_circuit_with_unsigned_types(vendor_models):  # noqa: F811
    m = am.Multiplier.from_c_function(vendor_models, "mul8s_unsigned_types", "u8", signed=True)
    t, v = value_table(m)
    assert m.signed and np.array_equal(t, np.outer(v, v) + (v[:, None] & 1))
    assert m.product(-128, -128) == 16384 and m.product(-1, 1) == -1 + 1
    # without the option the same circuit reads as unsigned patterns
    raw = am.Multiplier.from_c_function(vendor_models, "mul8s_unsigned_types", "u8")
    assert not raw.signed and raw.product(255, 2) == 65534 + 1


def test_16_bit_unsigned(vendor_models):  # noqa: F811
    m = am.Multiplier.from_c_function(vendor_models, "mul16u_clear4", "uint32_t f(uint16_t a, uint16_t b)")
    assert (m.bits, m.signed, m.plan) == (16, False, "function")
    rng = np.random.default_rng(0)
    for a, b in rng.integers(0, 65536, size=(200, 2)).tolist() + [[65535, 65535]]:
        assert m.product(a, b) == (a * b) & ~15
    a = rng.integers(0, 65536, size=(4, 6)).astype(np.uint16)
    b = rng.integers(0, 65536, size=(6, 3)).astype(np.uint16)
    expected = (((a.astype(np.int64)[:, :, None] * b.astype(np.int64)[None]) & ~15).sum(axis=1))
    assert np.array_equal(am.matmul(a, b, m), expected)
    # the library stays loaded as long as the multiplier: collect everything else first
    gc.collect()
    assert m.product(3, 7) == 16


def test_wide_models_in_a_matmul_check_every_result(vendor_models):  # noqa: F811
    """Wide models run from the kernels a tile step at a time; a result is
    checked against the product range unless the return type cannot leave
    it, and an error leaves the output untouched."""
    rng = np.random.default_rng(4)
    m = am.Multiplier.from_c_function(vendor_models, "mul12s_plus1", "s16", bits=12)
    a = rng.integers(-2048, 2048, size=(5, 40)).astype(np.int16)
    b = rng.integers(-2048, 2048, size=(40, 7)).astype(np.int16)
    a64, b64 = a.astype(np.int64)[:, :, None], b.astype(np.int64)[None]
    expected = (a64 * b64 + (a64 < 0)).sum(axis=1) - 3 * b.sum(axis=0, dtype=np.int64)
    assert np.array_equal(am.matmul(a, b, m, a_zero_point=3), expected)
    # 4095 * 4095 + 65536 is beyond 24 bits
    m = am.Multiplier.from_c_function(vendor_models, "mul8u_overflow", "u16", bits=12)
    a = np.full((3, 5), 100, np.uint16)
    b = np.full((5, 2), 100, np.uint16)
    a[2, 4] = b[4, 1] = 4095
    out = np.full((3, 2), -9, np.int64)
    with pytest.raises(am.OperandRangeError, match="for a=4095, b=4095: outside the 24-bit"):
        am.matmul(a, b, m, out=out)
    assert (out == -9).all()


@pytest.mark.parametrize("threads", [1, 2])
def test_wide_model_sums_across_blocks(vendor_models, threads):  # noqa: F811
    """The GEMM sums each output over blocks of 1,024 inner steps and 64
    columns: more of both, strided operands, both zero points."""
    m = am.Multiplier.from_c_function(vendor_models, "mul16u_clear4", "u16")
    rng = np.random.default_rng(9)
    a = np.asfortranarray(rng.integers(0, 65536, size=(9, 1030)).astype(np.uint16))
    b = rng.integers(0, 65536, size=(2060, 2 * 70)).astype(np.uint16)[::2, ::2]
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    expected = ((a64[:, :, None] * b64[None]) & ~15).sum(axis=1)
    expected += -7 * a64.sum(1, keepdims=True) - 65535 * b64.sum(0) + 1030 * 65535 * 7
    before = am.get_num_threads()
    am.set_num_threads(threads)
    try:
        got = am.matmul(a, b, m, a_zero_point=65535, b_zero_point=7)
    finally:
        am.set_num_threads(before)
    assert np.array_equal(got, expected)


def test_12_bit_signed_in_16_bit_types(vendor_models):  # noqa: F811
    m = am.Multiplier.from_c_function(vendor_models, "mul12s_plus1", "s16", bits=12)
    assert (m.bits, m.signed) == (12, True)
    assert m.product(-2048, -2048) == 2048 * 2048 + 1
    assert m.product(5, -7) == -35 and m.product(-7, 5) == -34
    assert m.metrics()["ep_percent"] == 50.0


def test_spec_rebuilds_and_pickles(vendor_models):  # noqa: F811
    m = am.Multiplier.from_c_function(vendor_models, "mul8s_unsigned_types", "u8", signed=True)
    assert m.spec == f"c:{os.path.abspath(vendor_models)}:mul8s_unsigned_types:u8?bits=8&signed=1"
    assert np.array_equal(am.multiplier(m.spec).table(), m.table())
    assert np.array_equal(pickle.loads(pickle.dumps(m)).table(), m.table())


def test_bad_models(vendor_models, tmp_path):  # noqa: F811
    with pytest.raises(LibraryIOError, match="does not exist"):
        am.Multiplier.from_c_function(tmp_path / "missing.so", "f", "u8")
    (tmp_path / "fake.so").write_text("not a library")
    with pytest.raises(LibraryIOError, match="cannot open"):
        am.Multiplier.from_c_function(tmp_path / "fake.so", "f", "u8")
    with pytest.raises(InvalidArgumentError, match="'nope' not found"):
        am.Multiplier.from_c_function(vendor_models, "nope", "u8")
    with pytest.raises(InvalidArgumentError, match="cannot declare 'int'"):
        am.Multiplier.from_c_function(vendor_models, "int", "u8")
    with pytest.raises(InvalidArgumentError, match="not a C identifier"):
        am.Multiplier.from_c_function(vendor_models, "a b", "u8")
    with pytest.raises(InvalidArgumentError, match="u64ba: uint64_t f\\(uint64_t b, uint64_t a\\)"):
        am.Multiplier.from_c_function(vendor_models, "mul8u_lowa", "float f(float a, float b)")
    with pytest.raises(InvalidArgumentError, match="not a supported prototype"):
        am.Multiplier.from_c_function(vendor_models, "mul8u_lowa", "uint16_t f(uint8_t x, uint8_t y)")
    with pytest.raises(InvalidArgumentError, match="does not fit"):
        am.Multiplier.from_c_function(vendor_models, "mul8u_lowa", "u8", bits=9)
    with pytest.raises(InvalidArgumentError, match="must be signed"):
        am.Multiplier.from_c_function(vendor_models, "mul8s_floor4", "s8", signed=False)
    with pytest.raises(am.OperandRangeError, match="outside the 16-bit unsigned product range"):
        am.Multiplier.from_c_function(vendor_models, "mul8u_overflow", "u16", bits=8)
    with pytest.raises(InvalidArgumentError, match="c:LIBRARY:SYMBOL:SIGNATURE"):
        am.multiplier("c:onlypath")


def test_from_callable():
    m = am.Multiplier.from_callable(lambda a, b: a * b - (a * b) % 4, bits=6, signed=True)
    t, v = value_table(m)
    assert m.signed and np.array_equal(t, np.outer(v, v) - np.outer(v, v) % 4)
    assert m.spec is None


def test_callable_errors_become_callback_errors():
    def broken(a, b):
        if (a, b) == (3, 2):
            raise ValueError("no products of 3 and 2 today")
        return a * b

    with pytest.raises(CallbackError, match=r"broken\(3, 2\) raised ValueError: no products of 3"):
        am.Multiplier.from_callable(broken, bits=4)
    with pytest.raises(CallbackError, match="expected an integer"):
        am.Multiplier.from_callable(lambda a, b: 1.5, bits=2)
    with pytest.raises(CallbackError, match="OverflowError"):
        am.Multiplier.from_callable(lambda a, b: 1 << 70, bits=2)
    with pytest.raises(am.AccumulatorOverflowError, match="int32"):
        am.Multiplier.from_callable(lambda a, b: 1 << 40, bits=2)
    with pytest.raises(InvalidArgumentError, match="bits"):
        am.Multiplier.from_callable(lambda a, b: 0, bits=9)
    with pytest.raises(TypeError):
        pickle.dumps(am.Multiplier.from_callable(lambda a, b: 0, bits=2))



# Values printed in the header comments of EvoApproxLib's mul12u_338 and
# mul12u_343, as (value, decimals printed); our fixture models have the same
# behaviour, so approxmul's metric conventions must reproduce them. MSE is
# printed in exponent form (57970.012e3), compared relatively.
PUBLISHED = {
    "mul12u_clear2": {"mae_percent": (0.037, 3), "mae": (6140, 0), "wce_percent": (0.15, 2),
                      "wce": (24561, 0), "wcre_percent": (100.00, 2), "ep_percent": (93.71, 2),
                      "mre_percent": (0.65, 2), "mse": 57970.012e3},
    "mul12u_shift3": {"mae_percent": (0.085, 3), "mae": (14320, 0), "wce_percent": (0.34, 2),
                      "wce": (57281, 0), "wcre_percent": (100.00, 2), "ep_percent": (98.39, 2),
                      "mre_percent": (1.38, 2), "mse": 29802.164e4},
}


@pytest.mark.parametrize("symbol", PUBLISHED)
def test_metrics_agree_with_published_evoapprox_headers(vendor_models, symbol):  # noqa: F811
    got = am.Multiplier.from_c_function(vendor_models, symbol, "u16", bits=12).metrics()
    published = dict(PUBLISHED[symbol])
    assert got["mse"] == pytest.approx(published.pop("mse"), rel=1e-7)
    for key, (value, decimals) in published.items():
        assert round(got[key], decimals) == value, (key, got[key])
