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
# SqueezeNet's dummy weights give logits near 9.5e9, where one float32 ulp is
# 1024: whether its final softmax comes out uniform (the reference: 0.001
# each) or concentrated on the largest logits (1/40 each) depends on the
# last bit of each channel's convolution sum, which differs between BLAS
# kernels (uniform with OpenBLAS on AVX-512, not on AVX2). Its logits are
# compared instead: against ONNX Runtime's, to float32 rounding.
ILL_CONDITIONED = {"squeezenet"}


def test_the_zoo_is_there():
    assert {"resnet50", "vgg19", "squeezenet", "shufflenet", "densenet121"} <= set(MODELS)


def dummy_input(path):
    """onnx's own input for these models (the backend test runner's non-random dummy data)."""
    from onnx.backend.test.runner import Runner

    graph = onnx.load(path, load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    value = next(i for i in graph.input if i.name not in inits)
    return Runner.generate_dummy_data(value, seed=0, random=False)


def assert_logits_match_onnxruntime(path, model, x):
    """The input of the final Softmax, ours against ONNX Runtime's."""
    proto = onnx.load(path)
    last = proto.graph.node[-1]
    assert last.op_type == "Softmax"
    proto.graph.output.append(onnx.helper.make_tensor_value_info(last.input[0], 1, None))
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run([last.input[0]], {session.get_inputs()[0].name: x})[0]
    softmax_input = next(n.inputs[0] for n in model.nodes if n.name == model.output)
    ours = model.forward(x, return_all=True)[softmax_input]
    np.testing.assert_allclose(ours.reshape(theirs.shape), theirs, rtol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_imports_reproduces_and_approximates(name):
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    model = load_onnx(path)
    x = dummy_input(path)
    reference = numpy_helper.to_array(onnx.load_tensor(path[:-5] + "_output_0.pb"))
    y = model.forward(x)
    if name in ILL_CONDITIONED:
        assert_logits_match_onnxruntime(path, model, x)
        assert y.shape == reference.shape and np.allclose(y.sum(axis=1), 1, rtol=1e-5)
    else:
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
