"""The structural model zoo onnx ships (onnx/backend/test/data/light): import, reproduce, approximate.

Each model (ResNet-50, VGG-19, SqueezeNet, ShuffleNet, DenseNet-121, ...) has
its weights replaced by ConstantOfShape nodes (folded at import) and comes
with a reference output for onnx's own dummy input. Every one uses only
supported ops, so every one must import, reproduce the reference output in
float within onnx's own tolerance for these models (rtol 1e-3, atol 1e-7;
2e-3 for DenseNet-121), agree with ONNX Runtime, and run quantized through
an approximate multiplier in every Conv/Gemm/MatMul.
"""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import numpy_helper  # noqa: E402

from approxmul_cffi import nn  # noqa: E402
from approxmul_cffi.onnx import load_onnx  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(LIGHT) if f.endswith(".onnx"))
RTOL = {"densenet121": 2e-3}  # onnx's own tolerances for these models


def test_the_zoo_is_there():
    assert {"resnet50", "vgg19", "squeezenet", "shufflenet", "densenet121"} <= set(MODELS)


def dummy_input(path):
    """onnx's own input for these models (the backend test runner's non-random dummy data)."""
    from onnx.backend.test.runner import Runner

    graph = onnx.load(path, load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    value = next(i for i in graph.input if i.name not in inits)
    return Runner.generate_dummy_data(value, seed=0, random=False)


@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_imports_reproduces_and_approximates(name):
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    model = load_onnx(path)
    x = dummy_input(path)
    reference = numpy_helper.to_array(onnx.load_tensor(path[:-5] + "_output_0.pb"))
    y = model.forward(x)
    np.testing.assert_allclose(y, reference, rtol=RTOL.get(name, 1e-3), atol=1e-7)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(y, session.run(None, {session.get_inputs()[0].name: x})[0],
                               rtol=1e-3, atol=1e-6)
    q = nn.quantize(model, x)
    assert q.layer_names  # its convolutions and Gemms take the multiplier
    exact = q.run_codes(x, "exact", return_all=True)
    approx = q.run_codes(x, "drum:k=3", return_all=True)
    changed = [n for n in q.layer_names if not np.array_equal(exact[n].codes, approx[n].codes)]
    assert changed == q.layer_names  # the approximate multiplier is in every layer
    out = approx[q.output]
    out = out.dequantize() if isinstance(out, nn.QTensor) else out
    assert out.shape == y.shape and np.all(np.isfinite(out))
