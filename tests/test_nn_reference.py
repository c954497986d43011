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
from approxmul_cffi import nn
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
    s, zp = float(qmodel.input_qparams.scale), int(qmodel.input_qparams.zero_point)
    v = x.astype(np.float64) / s
    codes = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5) + zp, 0, 255).astype(np.int64)

    def weighted(name, codes, s_x, zp_x, relu):
        m = multipliers[name]
        table = np.asarray(m.table(), dtype=np.int64)
        shift = 128 if m.signed else 0  # uint8 -> int8 domain: codes and zero point - 128
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
            exact = np.asarray(am.Multiplier.exact(8, m.signed).table(), dtype=np.int64)
            error = np.moveaxis(accumulate(exact) - acc, 1, -1).reshape(-1, acc.shape[1])
            corrections[name] = [round(Fraction(int(t), len(error))) for t in error.sum(0)]
        s_y, zp_y = float(node.out_qparams.scale), int(node.out_qparams.zero_point)
        qmin, qmax = (-128, 127) if m.signed else (0, 255)
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


def test_exact_multiplier_needs_no_correction(qmodel):
    got = qmodel.correct_bias(load_digits("train")[0][:20], "exact")
    assert all(not c.any() for c in got.values()) and len(got) == 4
