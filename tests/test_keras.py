"""The Keras adapter with real TensorFlow: bit-exact forward, gradients, fit, save/load, bad
input, model structures (functional, shared layers, sub-models, several inputs), training state."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import approxmul_cffi as am  # noqa: E402
from approxmul_cffi import quant  # noqa: E402
from approxmul_cffi.errors import ApproximationError  # noqa: E402
from approxmul_cffi.keras import ApproxLayer, approximate, layers  # noqa: E402

RNG = np.random.default_rng(7)
L = keras.layers


def _data(shape, n=32):
    return RNG.standard_normal((n, *shape)).astype(np.float32)


def _model(layer, shape):
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input(shape), layer])


CASES = [
    ("conv2d-same", lambda: L.Conv2D(6, 3, padding="same", activation="relu", name="l"), (9, 9, 3)),
    ("conv2d-stride", lambda: L.Conv2D(4, 3, strides=2, name="l"), (9, 9, 2)),
    ("conv2d-dilated", lambda: L.Conv2D(4, 3, dilation_rate=2, padding="same", name="l"), (8, 8, 2)),
    ("depthwise", lambda: L.DepthwiseConv2D(3, depth_multiplier=2, padding="same", name="l"), (7, 7, 3)),
    ("conv1d", lambda: L.Conv1D(5, 3, padding="same", activation="tanh", name="l"), (12, 4)),
    ("dense", lambda: L.Dense(7, name="l"), (10,)),
]


def _reference(layer, x):
    """The evaluator's integer layer (nn.QuantizedLayer) on the same weights and grids."""
    node, m = layer.q_node, layer.multiplier
    codes = node.in_qparams.quantize(x)
    if layer.kind == "dense":
        out = node.forward_codes(codes, m)
        return node.output_qparams(m.signed).dequantize(out)
    c4 = codes[:, None] if layer.kind == "conv1d" else codes
    out = node.output_qparams(m.signed).dequantize(
        node.forward_codes(np.ascontiguousarray(c4.transpose(0, 3, 1, 2)), m)).transpose(0, 2, 3, 1)
    return out[:, 0] if layer.kind == "conv1d" else out


@pytest.mark.parametrize("spec", ["drum:k=3", "drum:k=4,signed=1", "drum:bits=4,k=2",
                                  "exact:bits=12,signed=1"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bit_exact_with_the_evaluator_graph_and_eager(case, spec):
    _, make, shape = case
    x = _data(shape)
    approx = approximate(_model(make(), shape), spec, calibration=[x])
    layer = approx.get_layer("l")
    expected = _reference(layer, x)
    if layer.activation == "tanh":  # not fused: runs in float after the integer layer
        expected = np.tanh(expected)
    eager = approx(x).numpy()
    graph = approx.predict(x, batch_size=8, verbose=0)
    np.testing.assert_allclose(eager, expected.astype(np.float32), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(eager, graph)
    assert not np.array_equal(eager, 0)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_numpy_side_returns_arrays_tensorflow_adopts(case):
    # 64-byte aligned data is adopted by TensorFlow without a copy (docs/benchmarks.md)
    _, make, shape = case
    x = _data(shape)
    layer = approximate(_model(make(), shape), "drum:k=4,signed=1", calibration=[x]).get_layer("l")
    y, codes = layer._integer(x, layer.kernel.numpy(), layer.bias.numpy())
    for a in (y, codes):
        assert a.ctypes.data % 64 == 0 and a.flags.c_contiguous
    assert codes.dtype == np.int8
    want = am.quant.convert_codes(layer.q_node.in_qparams.quantize(x), signed=True)
    np.testing.assert_array_equal(codes, want)


def _float_twin(layer, x, w, b):
    (ph, pw), (sh, sw), (dh, dw) = layer.pads, layer.strides, layer.dilation
    pads = [[0, 0], [ph, ph], [pw, pw], [0, 0]]
    if layer.kind == "dense":
        return x @ w + b
    if layer.kind == "depthwise":
        return tf.nn.depthwise_conv2d(tf.pad(x, pads), w, [1, sh, sw, 1], "VALID",
                                      dilations=(dh, dw)) + b
    return tf.nn.convolution(tf.pad(x, pads), w, (sh, sw), "VALID", dilations=(dh, dw)) + b


@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "conv1d"], ids=lambda c: c[0])
def test_ste_gradients_are_the_dequantized_float_layer(case):
    _, make, shape = case
    x = _data(shape, 8)
    approx = approximate(_model(make(), shape), "drum:k=3", calibration=[x])
    layer = approx.get_layer("l")
    xt = tf.constant(x)
    dy = tf.constant(RNG.standard_normal(approx(x).shape).astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = approx(xt)
    gx, gw, gb = tape.gradient(y, [xt, layer.kernel.value, layer.bias.value], output_gradients=dy)
    if layer.activation == "relu":
        dy = dy * tf.cast(y > 0, tf.float32)
    q = layer.q_node.in_qparams
    x_dq = tf.constant(q.dequantize(q.quantize(x)).astype(np.float32))
    w_dq = tf.constant(layer.weight_map(None))
    with tf.GradientTape() as tape:
        tape.watch([x_dq, w_dq])
        ref = _float_twin(layer, x_dq, w_dq, tf.zeros(layer.out_channels()))
    rx, rw = tape.gradient(ref, [x_dq, w_dq], output_gradients=dy)
    np.testing.assert_allclose(gx, rx, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(gw, rw, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(gb, tf.reduce_sum(tf.reshape(dy, (-1, dy.shape[-1])), 0), atol=1e-5)


def _grads(spec, gradient, make=lambda: L.Conv2D(3, 3, padding="same", name="l"), shape=(8, 8, 2)):
    x = np.random.default_rng(11).standard_normal((8, *shape)).astype(np.float32)
    keras.utils.set_random_seed(1)  # before the layer exists: its initializers take their seeds
    approx = approximate(_model(make(), shape), spec, calibration=[x], gradient=gradient)
    xt = tf.constant(x)
    layer = approx.get_layer("l")
    with tf.GradientTape() as tape:
        tape.watch(xt)
        loss = tf.reduce_sum(approx(xt) ** 2)
    return [g.numpy() for g in tape.gradient(loss, [xt, layer.kernel.value, layer.bias.value])]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_table2d_equals_ste_for_exact_and_differs_for_drum(case):
    _, make, shape = case
    for a, b in zip(_grads("exact", "ste", make, shape), _grads("exact", "table2d", make, shape)):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)
    ste, table2d = _grads("drum:k=3", "ste", make, shape), _grads("drum:k=3", "table2d", make, shape)
    assert all(np.abs(a - b).max() > 1e-3 for a, b in zip(ste[:2], table2d[:2]))


@pytest.mark.parametrize("exact, drum", [("exact", "drum:k=3"),
                                         ("exact:bits=4", "drum:bits=4,k=2")])  # 16-entry slopes
def test_table_gradient_equals_ste_for_exact_and_differs_for_drum(exact, drum):
    for a, b in zip(_grads(exact, "ste"), _grads(exact, "table")):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)
    ste, table = _grads(drum, "ste"), _grads(drum, "table")
    assert all(np.abs(a - b).max() > 1e-3 for a, b in zip(ste[:2], table[:2]))


def _task():
    from approxmul_cffi.datasets import load_digits
    x, y = load_digits("train")
    return x.transpose(0, 2, 3, 1)[:600], y[:600]


def _digits_net():
    keras.utils.set_random_seed(3)
    return keras.Sequential([keras.Input((8, 8, 1)), L.Conv2D(8, 3, padding="same", activation="relu",
                                                              name="conv"),
                             L.Flatten(), L.Dense(10, name="fc")])


def _trained_float_net(x, y):
    net = _digits_net()
    net.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    net.fit(x, y, epochs=4, batch_size=50, shuffle=False, verbose=0)
    return net


@pytest.mark.parametrize("eager", [False, True])
def test_fit_raises_accuracy_and_graph_equals_eager(eager, tmp_path):
    """drum:k=3 on uint8 codes costs the float net accuracy; a short fit through it recovers."""
    x, y = _task()
    approx = approximate(_trained_float_net(x, y), "drum:k=3", calibration=[x[:200]])
    approx.compile(keras.optimizers.Adam(3e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   metrics=["accuracy"], run_eagerly=eager)
    before = approx.evaluate(x, y, verbose=0)[1]
    approx.fit(x, y, epochs=2, batch_size=50, shuffle=False, verbose=0)
    after = approx.evaluate(x, y, verbose=0)[1]
    assert after > before + 0.02 and after >= 0.95, (before, after)
    np.save(tmp_path.parent / f"fit-{eager}.npy", approx.get_layer("conv").kernel.numpy())
    other = tmp_path.parent / f"fit-{not eager}.npy"
    if other.exists():  # the second mode compares with the first
        np.testing.assert_allclose(np.load(other), approx.get_layer("conv").kernel.numpy(),
                                   atol=1e-5)


def test_save_and_load_round_trip(tmp_path):
    x, _ = _task()
    approx = approximate(_digits_net(), {"conv": "drum:k=3", "fc": "exact"}, calibration=[x[:100]],
                         gradient="table")
    path = tmp_path / "approx.keras"
    approx.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.get_layer("conv").multiplier.spec == approx.get_layer("conv").multiplier.spec
    assert loaded.get_layer("conv").gradient == "table"
    np.testing.assert_array_equal(loaded.predict(x[:64], verbose=0), approx.predict(x[:64], verbose=0))
    table = am.Multiplier.from_table(np.outer(np.arange(256), np.arange(256)).astype(np.int32))
    bare = approximate(_digits_net(), table, calibration=[x[:100]])
    with pytest.raises(ApproximationError, match="no spec string"):
        bare.save(tmp_path / "bare.keras")


def test_layers_lists_approximable_layers():
    infos = layers(_digits_net())
    assert [(i.name, i.kind, i.weight_shape, i.macs) for i in infos] == [
        ("conv", "Conv2D", (3, 3, 1, 8), 8 * 8 * 8 * 9), ("fc", "Dense", (512, 10), 5120)]


def test_bad_input_gets_clear_errors():
    x = _data((8, 8, 2), 4)
    conv = lambda **kw: _model(L.Conv2D(4, 3, name="l", **kw), (8, 8, 2))  # noqa: E731
    with pytest.raises(ApproximationError, match=r"'nope'.*layers: l"):
        approximate(conv(), {"nope": "exact"}, calibration=[x])
    with pytest.raises(ApproximationError, match="groups=2"):
        approximate(conv(groups=2), "exact", calibration=[x])
    with pytest.raises(ApproximationError, match="asymmetrically"):
        approximate(conv(padding="same", strides=2), "exact", calibration=[x])
    with pytest.raises(ApproximationError, match="causal"):
        approximate(_model(L.Conv1D(2, 3, padding="causal", name="c"), (6, 2)), "exact",
                    calibration=[_data((6, 2), 2)])
    with pytest.raises(ApproximationError, match="gradient must be one of"):
        approximate(conv(), "exact", calibration=[x], gradient="exactish")
    with pytest.raises(ApproximationError, match="4-bit codes, got a 8-bit multiplier"):
        approximate(conv(), "exact", calibration=[x], scheme={"bits": 4})
    with pytest.raises(ApproximationError, match="at most 12 bits, the layers have 16"):
        approximate(conv(), "exact:bits=16", calibration=[x], gradient="table2d")
    with pytest.raises(ApproximationError, match="calibration batch contains NaN"):
        approximate(conv(), "exact", calibration=[x * np.nan])
    with pytest.raises(ApproximationError, match="keras.Model"):
        approximate(object(), "exact", calibration=[x])
    keras.config.set_dtype_policy("mixed_float16")
    try:
        mixed = conv()
    finally:
        keras.config.set_dtype_policy("float32")
    with pytest.raises(ApproximationError, match="mixed_float16"):
        approximate(mixed, "exact", calibration=[x])
    approx = approximate(conv(), "exact", calibration=[x], gradient="none")
    with pytest.raises(Exception, match="NaN or infinity"):
        approx(x * np.inf)
    xt = tf.constant(x)
    with pytest.raises(Exception, match="gradient='none'"):
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = approx(xt)
        tape.gradient(y, xt)


def test_keras_md_example_runs(tmp_path, monkeypatch):
    import pathlib
    import re
    doc = pathlib.Path(__file__).resolve().parent.parent / "docs" / "keras.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"keras.md block {number}", "exec"), namespace)
    assert (tmp_path / "approx.keras").is_file()


def _digits_lenet(spec, **options):
    """(approximated Keras digits LeNet, the evaluator's QuantizedModel on the adapter's
    grids, training images, test images) for one multiplier."""
    from approxmul_cffi import nn
    from approxmul_cffi.datasets import load_digits
    from approxmul_cffi.evaluation import bundled_model
    from approxmul_cffi.keras.layer import qparams_of
    from approxmul_cffi.keras.models import digits_lenet
    x_train, (x, y) = load_digits("train")[0], load_digits("test")
    approx = approximate(digits_lenet(), spec, calibration=[x_train.transpose(0, 2, 3, 1)],
                         **options)
    # The adapter observes ranges in TensorFlow's float32 forward, the evaluator in
    # NumPy's float64 one: the grids agree to float32 rounding, and with the
    # adapter's grids the evaluator gives its outputs exactly (an AVX2 machine
    # turned one of 4,500 logits by a code with the evaluator's own grids).
    own = nn.quantize(bundled_model(), x_train, quant.QuantConfig(bits=am.multiplier(spec).bits))
    qparams = dict(own.qparams)
    tails = {"conv1": "relu1", "conv2": "relu2", "fc1": "relu3", "fc2": "fc2"}
    qparams[nn.INPUT] = qparams_of(approx.get_layer("conv1").in_qparams_dict)
    for layer, tail in tails.items():
        grid = qparams_of(approx.get_layer(layer).out_qparams_dict)
        np.testing.assert_allclose(float(grid.scale), float(own.qparams[tail].scale), rtol=1e-6)
        qparams[tail] = grid
    return approx, nn.QuantizedModel(bundled_model(), qparams, own.config), x_train, x


# Other widths up to 6 bits here: the adapter calibrates each layer's input
# grid on its own, and at 12 bits the float32 rounding between its grid and
# the evaluator's shared one turned 4 of 4,500 logits by a code (each layer
# alone is bit-exact at 12 bits, above).
@pytest.mark.parametrize("spec", ["exact", "drum:k=3", "drum:k=4,signed=1",
                                  "drum:bits=6,k=3,signed=1", "exact:bits=4"])
def test_digits_lenet_predictions_equal_the_evaluator(spec):
    approx, qmodel, _, x = _digits_lenet(spec)
    out = approx.predict(x.transpose(0, 2, 3, 1), batch_size=256, verbose=0)
    expected = qmodel.run(x, am.multiplier(spec))
    np.testing.assert_array_equal(out.argmax(1), expected.argmax(1))
    np.testing.assert_allclose(out, expected, atol=1e-5)


@pytest.mark.parametrize("spec", ["truncated:bits=8,cut=10", "drum:k=3,signed=1"])
def test_bias_correction_equals_the_evaluator(spec):
    from approxmul_cffi.keras import recalibrate
    from approxmul_cffi.keras.layer import ApproxLayer
    approx, qmodel, x_train, x = _digits_lenet(spec, bias_correction=True)
    m = am.multiplier(spec)
    expected = qmodel.correct_bias(x_train, m)
    names = ("conv1", "conv2", "fc1", "fc2")
    for name in names:
        assert approx.get_layer(name).correction == expected[name].tolist(), name
    assert any(np.any(expected[name] != 0) for name in names)
    out = approx.predict(x.transpose(0, 2, 3, 1), batch_size=256, verbose=0)
    logits = qmodel.run(x, m)
    np.testing.assert_array_equal(out.argmax(1), logits.argmax(1))
    np.testing.assert_allclose(out, logits, atol=1e-5)
    # the correction travels in the config (saved models keep it) ...
    layer = approx.get_layer("conv2")
    assert ApproxLayer.from_config(layer.get_config()).correction == layer.correction
    # ... and recalibration measures it again, as a fresh approximate on the same data
    part = x_train[:300].transpose(0, 2, 3, 1)
    recalibrate(approx, [part])
    from approxmul_cffi.keras.models import digits_lenet
    fresh = approximate(digits_lenet(), spec, calibration=[part], bias_correction=True)
    for name in names:
        assert approx.get_layer(name).correction == fresh.get_layer(name).correction, name


def test_recalibrate_gives_the_grids_of_a_fresh_approximate():
    from approxmul_cffi.keras import recalibrate
    x, y = _task()
    net = _trained_float_net(x[:200], y[:200])
    approx = approximate(net, "drum:k=3", calibration=[x[:100]])
    approx.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    approx.fit(x, y, epochs=1, batch_size=50, verbose=0)
    for name in ("conv", "fc"):
        net.get_layer(name).set_weights(approx.get_layer(name).get_weights())
    fresh = approximate(net, "drum:k=3", calibration=[x[:100]])
    assert approx.get_layer("fc").out_qparams_dict != fresh.get_layer("fc").out_qparams_dict
    recalibrate(approx, [x[:100]])
    for name in ("conv", "fc"):
        assert approx.get_layer(name).in_qparams_dict == fresh.get_layer(name).in_qparams_dict
        assert approx.get_layer(name).out_qparams_dict == fresh.get_layer(name).out_qparams_dict
    np.testing.assert_array_equal(approx.predict(x, verbose=0), fresh.predict(x, verbose=0))


# ---- model structures: functional graphs, shared layers, sub-models, several inputs

def _assert_close(got, want, rel=0.01):
    """Within ``rel`` of the float output's span: 12-bit codes of the exact multiplier
    cost far less, a saturated grid far more."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    err, span = np.abs(got - want).max(), want.max() - want.min()
    assert err <= rel * span, (err, span)


def test_functional_models_with_unnamed_inputs_and_residuals_match_the_float_model():
    keras.utils.set_random_seed(2)
    i = keras.Input((6,))  # unnamed: clone_model gives the clone's input another name
    chain = keras.Model(i, L.Dense(2, name="d")(L.Dense(4, name="d0")(i)))
    x = _data((6,), 16)
    approx = approximate(chain, "exact:bits=12", calibration=[x])
    for name in ("d0", "d"):
        assert isinstance(approx.get_layer(name), ApproxLayer)
        for a, b in zip(approx.get_layer(name).get_weights(), chain.get_layer(name).get_weights()):
            np.testing.assert_array_equal(a, b)
    _assert_close(approx(x), chain(x))
    i = keras.Input((7, 7, 3))
    a = L.Conv2D(3, 3, padding="same", activation="relu", name="c1")(i)
    b = L.Conv2D(4, 1, name="c2")(L.Add()([a, i]))
    residual = keras.Model(i, L.Dense(2, name="fc")(L.GlobalAveragePooling2D()(b)))
    x = _data((7, 7, 3), 16)
    approx = approximate(residual, "exact:bits=12", calibration=[x])
    assert [type(approx.get_layer(n)).__name__ for n in ("c1", "c2", "fc")] == ["ApproxLayer"] * 3
    _assert_close(approx(x), residual(x))


def test_a_shared_layer_is_calibrated_on_all_its_calls():
    keras.utils.set_random_seed(4)
    i = keras.Input((6,))
    d = L.Dense(6, name="d")
    net = keras.Model(i, d(d(i)))
    assert [(info.name, info.macs) for info in layers(net)] == [("d", 2 * 36)]
    x = _data((6,), 64)
    approx = approximate(net, "exact:bits=12", calibration=[x])
    layer = approx.get_layer("d")
    # one layer, one grid for both calls, each call the evaluator's integer layer
    twice = _reference(layer, _reference(layer, x).astype(np.float32))
    np.testing.assert_allclose(approx(x).numpy(), twice, rtol=0, atol=1e-6)
    _assert_close(approx(x), net(x))  # the first call's grid alone saturates the second
    # calls on different per-sample shapes cannot share one approximate layer
    i = keras.Input((2, 6))
    d = L.Dense(6, name="d")
    net = keras.Model(i, d(L.GlobalAveragePooling1D()(d(i))))
    with pytest.raises(ApproximationError, match=r"'d' is called on per-sample inputs of shapes "
                                                 r"\(2, 6\), \(6,\)"):
        approximate(net, "exact", calibration=[_data((2, 6), 4)])


def test_unknown_dimensions_are_refused_naming_the_layer():
    for layer, shape in ((L.Dense(4, name="l"), (None, 5)), (L.Conv1D(3, 3, name="l"), (None, 4))):
        net = _model(layer, shape)
        info = layers(net)[0]
        assert info.input_shape == shape and info.macs is None
        with pytest.raises(ApproximationError, match=r"layer 'l'.*None.*fixed to one per-sample"):
            approximate(net, "exact", calibration=[_data((7, shape[1]), 4)])


class _Block(keras.layers.Layer):
    """A custom layer holding a Dense layer, which approximate() does not enter."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.fc = L.Dense(3, name="hidden")

    def call(self, x):
        return self.fc(x)


def test_sub_models_are_entered_and_other_containers_are_reported():
    keras.utils.set_random_seed(6)
    inner = keras.Sequential([keras.Input((6,)), L.Dense(5, activation="relu", name="inner_d")],
                             name="inner")
    i = keras.Input((6,))
    net = keras.Model(i, L.Dense(2, name="outer_d")(inner(i)))
    assert [info.name for info in layers(net)] == ["inner_d", "outer_d"]
    x, y = _data((6,), 32), _data((2,), 32)
    approx = approximate(net, "exact:bits=12", calibration=[x])
    assert isinstance(approx.get_layer("inner").get_layer("inner_d"), ApproxLayer)
    _assert_close(approx(x), net(x))
    # a frozen backbone sub-model stays frozen: fine-tuning trains the head only
    inner.trainable = False
    approx = approximate(net, {"inner_d": "drum:k=3", "outer_d": "exact"}, calibration=[x])
    assert len(approx.trainable_weights) == len(net.trainable_weights) == 2
    frozen = approx.get_layer("inner").get_weights()
    head = approx.get_layer("outer_d").get_weights()
    approx.compile(keras.optimizers.SGD(0.1), "mse")
    approx.fit(x, y, epochs=1, batch_size=16, verbose=0)
    for a, b in zip(approx.get_layer("inner").get_weights(), frozen):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(approx.get_layer("outer_d").get_weights()[0], head[0])
    # the same name inside and outside a sub-model is ambiguous
    inner = keras.Sequential([keras.Input((6,)), L.Dense(6, name="d")], name="inner")
    twin = keras.Model(i, L.Dense(2, name="d")(inner(i)))
    with pytest.raises(ApproximationError, match="named 'd'"):
        approximate(twin, "exact", calibration=[x])
    # layers inside custom layers stay float, with a warning naming them
    boxed = keras.Sequential([keras.Input((6,)), _Block(name="block"), L.Dense(2, name="d")])
    with pytest.warns(UserWarning, match=r"'block' \(_Block\) holds .*\(hidden\) that stay float"):
        approx = approximate(boxed, "exact", calibration=[x])
    assert isinstance(approx.get_layer("d"), ApproxLayer)


def test_models_with_several_inputs_take_lists_or_dicts_of_arrays():
    keras.utils.set_random_seed(7)
    a, b = keras.Input((4,), name="a"), keras.Input((3,), name="b")
    net = keras.Model([a, b], L.Dense(2, name="d")(L.Concatenate()([a, b])))
    xa, xb = _data((4,), 16), _data((3,), 16)
    grids = []
    for calibration in ([[xa, xb]], [([xa, xb], np.zeros(16))], [{"a": xa, "b": xb}]):
        approx = approximate(net, "exact:bits=12", calibration=calibration)
        grids.append(approx.get_layer("d").in_qparams_dict)
    assert grids[0] == grids[1] == grids[2]
    _assert_close(approx([xa, xb]), net([xa, xb]))
    for bad in ([xa], [[xa, xb, xa]]):
        with pytest.raises(ApproximationError, match="the model takes 2 inputs"):
            approximate(net, "exact", calibration=bad)


# ---- what the approximate layer takes over from the replaced one

def test_trainable_regularizers_and_constraints_carry_over(tmp_path):
    keras.utils.set_random_seed(5)
    reg = keras.regularizers
    net = keras.Sequential([
        keras.Input((6,)), L.Dense(4, name="backbone", kernel_regularizer=reg.L2(1.0)),
        L.Dense(3, name="head", kernel_regularizer=reg.L2(0.5), bias_regularizer=reg.L1(0.1),
                activity_regularizer=reg.L2(0.01), kernel_constraint=keras.constraints.NonNeg(),
                bias_initializer="ones")])
    net.get_layer("backbone").trainable = False
    assert (net.get_layer("head").kernel.numpy() < 0).any()
    x, y = _data((6,), 32), _data((3,), 32)
    approx = approximate(net, "exact", calibration=[x])
    assert not approx.get_layer("backbone").trainable
    assert len(approx.trainable_weights) == len(net.trainable_weights) == 2
    net(x), approx(x)  # the activity regularizer's loss comes from the last call
    assert len(approx.losses) == len(net.losses) == 3  # the frozen backbone's is off, as in Keras
    np.testing.assert_allclose(sorted(map(float, approx.losses)), sorted(map(float, net.losses)),
                               rtol=0.02)
    backbone = approx.get_layer("backbone").get_weights()
    approx.compile(keras.optimizers.SGD(0.05), "mse")
    approx.fit(x, y, epochs=1, batch_size=16, verbose=0)
    for a, b in zip(approx.get_layer("backbone").get_weights(), backbone):
        np.testing.assert_array_equal(a, b)
    assert (approx.get_layer("head").kernel.numpy() >= 0).all()  # NonNeg after each step
    approx.save(tmp_path / "frozen.keras")
    loaded = keras.models.load_model(tmp_path / "frozen.keras")
    assert not loaded.get_layer("backbone").trainable
    head = loaded.get_layer("head")
    assert isinstance(head.kernel_constraint, keras.constraints.NonNeg)
    assert head.kernel_regularizer.get_config() == {"l2": 0.5}
    assert head.activity_regularizer.get_config() == {"l2": 0.01}
    loaded(x), approx(x)
    np.testing.assert_allclose(sorted(map(float, loaded.losses)),
                               sorted(map(float, approx.losses)), rtol=1e-6)
    # DepthwiseConv2D names its kernel's "depthwise_"; LoRA has no approximate twin
    dw = _model(L.DepthwiseConv2D(3, depthwise_regularizer=reg.L2(0.3),
                                  depthwise_constraint="non_neg", name="l"), (5, 5, 2))
    layer = approximate(dw, "exact", calibration=[_data((5, 5, 2), 4)]).get_layer("l")
    assert layer.kernel_regularizer.get_config() == {"l2": 0.3}
    assert isinstance(layer.kernel_constraint, keras.constraints.NonNeg)
    with pytest.raises(ApproximationError, match="'l': LoRA is enabled"):
        approximate(_model(L.Dense(4, lora_rank=2, name="l"), (6,)), "exact",
                    calibration=[_data((6,), 4)])


def test_loading_a_saved_model_needs_the_import_and_the_docs_say_so(tmp_path):
    import pathlib
    path = tmp_path / "a.keras"
    net = _model(L.Dense(2, name="l"), (4,))
    approximate(net, "exact", calibration=[_data((4,), 4)]).save(path)
    registry = keras.saving.get_custom_objects()  # unregistered: as if never imported
    key = "approxmul>ApproxLayer"
    cls = registry.pop(key)
    try:
        with pytest.raises(TypeError, match="Could not locate class 'ApproxLayer'"):
            keras.models.load_model(path)
    finally:
        registry[key] = cls
    assert isinstance(keras.models.load_model(path).get_layer("l"), ApproxLayer)
    doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "keras.md").read_text()
    assert "Could not locate class 'ApproxLayer'" in doc
    assert "import approxmul_cffi.keras" in doc
