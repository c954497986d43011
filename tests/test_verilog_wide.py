"""Wide (13..16-bit) netlists inside the kernels: the function plan hands
each GEMM row of products to the netlist, which simulates up to 256
arbitrary pairs per pass over its gates. Reference: the family the netlist
was written from, run through its own plan."""

import numpy as np
import pytest

import approxmul_cffi as am


def netlist_of(spec):
    family = am.multiplier(spec)
    return family, am.Multiplier.from_verilog(family.to_verilog(), signed=family.signed)


def operands(rng, m, shape):
    lo, hi = (-(1 << (m.bits - 1)), 1 << (m.bits - 1)) if m.signed else (0, 1 << m.bits)
    return rng.integers(lo, hi, size=shape).astype(np.int16 if m.signed else np.uint16)


@pytest.mark.parametrize("spec", ["exact:bits=16", "truncated:bits=16,cut=12",
                                  "exact:bits=15,signed=1", "bam:bits=13,signed=1,hbl=2,vbl=9"])
@pytest.mark.parametrize("rows, inner, cols", [(1, 1, 1), (3, 70, 65), (5, 33, 513), (2, 9, 256)])
def test_matmul_rows_through_the_netlist(spec, rows, inner, cols):
    # 65, 256 and 513 columns: blocks of 64 lanes with a tail, one whole
    # 256-pair pass, and a tile boundary with one column left over
    family, netlist = netlist_of(spec)
    assert netlist.plan == "function"
    rng = np.random.default_rng(rows * 1000 + cols)
    a, b = operands(rng, family, (rows, inner)), operands(rng, family, (inner, cols))
    expected = np.asarray(am.matmul(a, b, family))
    assert np.array_equal(am.matmul(a, b, netlist), expected)
    # transposed and strided operands take the same path
    bt = np.ascontiguousarray(b.T).T
    assert np.array_equal(am.matmul(a, bt, netlist), expected)
    assert np.array_equal(am.matmul(a[:, ::-1], b[::-1], netlist), expected)


def test_extreme_operands_and_zero_points():
    family, netlist = netlist_of("exact:bits=16")
    a = np.array([[0, 65535, 1, 32768]], dtype=np.uint16)
    b = np.array([[65535], [65535], [0], [32769]], dtype=np.uint16)
    expected = (a.astype(np.int64) @ b.astype(np.int64))
    assert np.array_equal(am.matmul(a, b, netlist), expected)
    rng = np.random.default_rng(7)
    a, b = operands(rng, family, (4, 40)), operands(rng, family, (40, 300))
    za, zb = 1234, 60000
    reference = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
    out = am.matmul(a, b, netlist, a_zero_point=za, b_zero_point=zb)
    assert np.array_equal(out, reference)


def test_conv2d_through_a_wide_netlist():
    family, netlist = netlist_of("truncated:bits=16,cut=12")
    rng = np.random.default_rng(3)
    x = operands(rng, family, (2, 3, 9, 11))
    w = operands(rng, family, (4, 3, 3, 3))
    expected = np.asarray(am.conv2d(x, w, family, padding=1, stride=(1, 2)))
    assert np.array_equal(am.conv2d(x, w, netlist, padding=1, stride=(1, 2)), expected)


def test_row_products_outside_the_range_are_an_error():
    # a 13-bit netlist whose 27-bit output exceeds the 26-bit product range
    # for some pairs: the row path names the first such pair, writes nothing
    text = ("module m(A, B, O); input [12:0] A, B; output [26:0] O;\n"
            "  assign O = {A[12] & B[12], 13'b0, A};\nendmodule\n")
    netlist = am.Multiplier.from_verilog(text)
    a = np.array([[4096, 4096]], dtype=np.uint16)
    b = np.array([[1, 4096], [2, 4096]], dtype=np.uint16)
    out = np.full((1, 2), -7, dtype=np.int64)
    with pytest.raises(am.OperandRangeError, match="a=4096, b=4096: outside the 26-bit unsigned"):
        am.matmul(a, b, netlist, out=out)
    assert (out == -7).all()
    fine = np.array([[1, 2], [3, 5]], dtype=np.uint16)
    assert np.array_equal(am.matmul(a, fine, netlist), [[4096 * 2, 4096 * 2]])
