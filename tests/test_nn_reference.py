"""Integer inference of the bundled network against an independent reference.

The reference (nn_reference.py) reimplements conv, pooling, linear and
gemmlowp requantization with int64 loops and Python integers; only the
quantized parameters (scales, zero points, weight codes, folded float biases)
come from approxmul_cffi.nn.
"""

from fractions import Fraction

import numpy as np
import pytest

import approxmul_cffi as am
import nn_reference as ref
from approxmul_cffi import nn, quant
from approxmul_cffi.datasets import load_digits
from approxmul_cffi.evaluation import bundled_model

N_IMAGES = 60


@pytest.fixture(scope="module")
def qmodel():
    return nn.quantize(bundled_model(), load_digits("train")[0])


@pytest.fixture(scope="module")
def images():
    return load_digits("test")[0][:N_IMAGES]


def reference_logits(qmodel, x, multipliers, corrections=None, measure=False):
    """Output codes (uint8 domain) of the bundled LeNet, computed plainly.

    ``corrections`` {layer: integers per channel} are added to the biases;
    with ``measure``, each layer's correction is first measured on ``x``
    (rounded mean of exact minus approximate accumulators) and stored there.
    """
    bits = qmodel.config.bits
    s, zp = float(qmodel.input_qparams.scale), int(qmodel.input_qparams.zero_point)
    v = x.astype(np.float64) / s
    codes = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5) + zp, 0, 2**bits - 1).astype(np.int64)

    def weighted(name, codes, s_x, zp_x, relu):
        m = multipliers[name]
        # exact multipliers by arithmetic (no 2^24-entry tables at 12 bits)
        table = None if m.plan == "exact-gemm" else np.asarray(m.table(), dtype=np.int64)
        # unsigned -> signed domain: codes and zero point - 2^(bits-1)
        shift = 2**(bits - 1) if m.signed else 0
        node = qmodel.layer(name)
        wq = node.prepare(m.signed)
        w = wq.codes.astype(np.int64)
        s_w = np.broadcast_to(wq.qparams.scale, (w.shape[0],))
        zw = int(np.ravel(wq.qparams.zero_point)[0])
        def accumulate(table):
            if w.ndim == 4:
                return ref.conv2d(table, codes - shift, w, zp_x - shift, zw, padding=1)
            return ref.linear(table, codes - shift, w, zp_x - shift, zw)

        acc = accumulate(table)
        if measure:
            error = np.moveaxis(accumulate(None) - acc, 1, -1).reshape(-1, acc.shape[1])
            corrections[name] = [round(Fraction(int(t), len(error))) for t in error.sum(0)]
        s_y, zp_y = float(node.out_qparams.scale), int(node.out_qparams.zero_point)
        qmin, qmax = (-shift, 2**(bits - 1) - 1) if m.signed else (0, 2**bits - 1)
        lo = max(qmin, zp_y - shift) if relu else qmin
        y = ref.requantize(acc, node.bias, s_x, s_w, s_y, zp_y - shift, lo, qmax,
                           None if corrections is None else corrections.get(name))
        return y + shift, s_y, zp_y

    codes, s, zp = weighted("conv1", codes, s, zp, relu=True)
    codes = ref.maxpool2(codes)
    codes, s, zp = weighted("conv2", codes, s, zp, relu=True)
    codes = ref.maxpool2(codes).reshape(len(codes), -1)
    codes, s, zp = weighted("fc1", codes, s, zp, relu=True)
    codes, s, zp = weighted("fc2", codes, s, zp, relu=False)
    return codes


def library_logits(qmodel, x, assignment):
    out = qmodel.run_codes(x, assignment)
    return out.to_domain(False).codes.astype(np.int64)


def test_bundled_structure_is_what_the_reference_implements(qmodel):
    assert [n.name for n in qmodel.nodes] == [
        "conv1", "pool1", "conv2", "pool2", "flatten", "fc1", "fc2"]
    assert [n.layer.activation for n in qmodel.nodes if n.layer.takes_multiplier] == [
        "relu", "relu", "relu", None]


@pytest.mark.parametrize("signed", [False, True])
def test_exact_multiplier_matches_reference_bit_for_bit(qmodel, images, signed):
    assignment = qmodel.assign(am.Multiplier.exact(bits=8, signed=signed))
    expected = reference_logits(qmodel, images, assignment)
    got = library_logits(qmodel, images, assignment)
    np.testing.assert_array_equal(got, expected)
    # not a degenerate network: logits spread and decide the class
    assert len(np.unique(got)) > 50
    assert (got.argmax(1) == load_digits("test")[1][:N_IMAGES]).mean() > 0.95


def test_mixed_tables_and_domains_match_reference(qmodel, images):
    rng = np.random.default_rng(5)

    def noisy(signed, spread):
        exact = np.asarray(am.Multiplier.exact(bits=8, signed=signed).table(), dtype=np.int64)
        table = exact + rng.integers(-spread, spread + 1, exact.shape)
        return am.Multiplier.from_table(table.astype(np.int32), signed=signed)

    assignment = qmodel.assign(noisy(False, 300), {
        "conv1": noisy(True, 200),       # signed layer between unsigned ones
        "fc1": am.Multiplier.exact(bits=8, signed=True),
    })
    expected = reference_logits(qmodel, images, assignment)
    np.testing.assert_array_equal(library_logits(qmodel, images, assignment), expected)
    exact = library_logits(qmodel, images, qmodel.assign(None))
    assert not np.array_equal(expected, exact)  # the tables did change something


@pytest.mark.parametrize("spec", ["truncated:bits=8,cut=10", "drum:k=3,signed=1"])
def test_bias_correction_matches_reference(images, spec):
    """Corrections measured layer after layer on calibration images, then applied."""
    qmodel = nn.quantize(bundled_model(), load_digits("train")[0])   # its own: corrections stay
    calibration = load_digits("train")[0][:50]
    assignment = qmodel.assign(spec)
    expected = {}
    reference_logits(qmodel, calibration, assignment, expected, measure=True)
    got = qmodel.correct_bias(calibration, assignment, batch_size=16)   # batches sum exactly
    assert sorted(got) == sorted(expected) == ["conv1", "conv2", "fc1", "fc2"]
    for name in got:
        assert got[name].tolist() == expected[name]
    assert any(np.abs(c).max() > 1000 for c in got.values())         # not a no-op
    logits = library_logits(qmodel, images, assignment)
    np.testing.assert_array_equal(logits, reference_logits(qmodel, images, assignment, expected))
    other = qmodel.assign("drum:k=4")   # another multiplier: no correction
    np.testing.assert_array_equal(library_logits(qmodel, images, other),
                                  reference_logits(qmodel, images, other))


@pytest.mark.parametrize("bits", [4, 6, 10, 12])
def test_codes_of_other_widths_match_reference(images, bits):
    """2-16-bit quantization (here 4-12): the grids, weight codes and requantization
    of n-bit codes, signed and unsigned, exact and through an n-bit table."""
    qmodel = nn.quantize(bundled_model(), load_digits("train")[0], quant.QuantConfig(bits=bits))
    assert qmodel.input_qparams.bits == bits and qmodel.input_qparams.qmax == 2**bits - 1
    x = images[:20]
    rng = np.random.default_rng(bits)
    for signed in (False, True):
        exact = am.Multiplier.exact(bits=bits, signed=signed)
        assignment = qmodel.assign(exact)
        got = library_logits(qmodel, x, assignment)
        np.testing.assert_array_equal(got, reference_logits(qmodel, x, assignment))
        assert got.max() > 255 if bits > 8 else got.max() < 2**bits  # codes of the width
        assert qmodel.layer("conv2").prepare(signed).codes.dtype == quant.code_dtype(signed, bits)
    if bits <= 10:  # an arbitrary table of the width, in both domains (10 bits: generic kernel)
        table = np.asarray(am.Multiplier.exact(bits=bits, signed=True).table(), np.int64)
        noisy = am.Multiplier.from_table((table + rng.integers(-9, 10, table.shape)).astype(np.int32),
                                         signed=True)
        assignment = qmodel.assign(noisy, {"fc1": am.Multiplier.exact(bits=bits)})
        got = library_logits(qmodel, x, assignment)
        np.testing.assert_array_equal(got, reference_logits(qmodel, x, assignment))
    with pytest.raises(am.errors.ModelError, match=f"{bits}-bit codes, got a multiplier of 8 bits"):
        qmodel.assign("drum:k=3")


def test_accuracy_rises_with_the_width():
    """Not only bit-exact but sensible: 2-bit codes lose the digits, 4-bit ones keep them
    (measured: 51 % at 2 bits, 94 % at 3, 99.1 % at 4, 99.6 % from 5 to 12)."""
    x_train, (x, y) = load_digits("train")[0], load_digits("test")
    accuracy = {}
    for bits in (2, 3, 4, 8, 12):
        qmodel = nn.quantize(bundled_model(), x_train, quant.QuantConfig(bits=bits))
        accuracy[bits] = (qmodel.run(x, am.Multiplier.exact(bits=bits)).argmax(1) == y).mean()
    assert accuracy[2] < 0.6 < 0.9 < accuracy[3] < accuracy[4]
    assert accuracy[4] > 0.98 and accuracy[8] == accuracy[12] > 0.99


def test_exact_multiplier_needs_no_correction(qmodel):
    got = qmodel.correct_bias(load_digits("train")[0][:20], "exact")
    assert all(not c.any() for c in got.values()) and len(got) == 4
