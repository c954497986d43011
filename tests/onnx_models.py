"""ONNX models for the import tests, built with onnx.helper (no exporter needed)."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from approxmul_cffi.evaluation import bundled_model

OPSET = 17


def make_model(nodes, inputs, outputs, initializers=(), opset=OPSET):
    """A ModelProto; inputs/outputs are (name, shape) pairs of float tensors."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(initializers).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    for out in model.graph.output:  # undeclared output shapes: what shape inference says
        if not out.type.tensor_type.HasField("shape"):
            inferred = onnx.shape_inference.infer_shapes(model).graph
            known = {v.name: v for v in list(inferred.value_info) + list(inferred.output)}
            if known.get(out.name) is not None and known[out.name].type.tensor_type.HasField("shape"):
                out.CopyFrom(known[out.name])
            else:
                out.type.tensor_type.shape.SetInParent()
    return model


def u8s8_saturates():
    """True where ONNX Runtime's uint8 x int8 kernels saturate (x86-64 without AVX-512 VNNI).

    There MLAS multiplies with vpmaddubsw, which saturates each pair of
    products at 32767 (ONNX Runtime's quantization docs): 255*127 + 255*127
    comes out as 32767, not 64770. ONNX Runtime's own integer results are
    then not exact, and no exact arithmetic can equal them.
    """
    import onnxruntime as ort

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 1])],
        [numpy_helper.from_array(np.full((2, 1), 127, np.int8), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return int(session.run(None, {"a": np.full((1, 2), 255, np.uint8)})[0][0, 0]) != 255 * 127 * 2


def quantize_static(source, target, reader, **options):
    """onnxruntime's quantize_static; int8 weights in 7 bits (``reduce_range``, ONNX Runtime's
    advice) where its kernels saturate, so that its integer results are exact there too."""
    from onnxruntime import quantization

    if u8s8_saturates():
        options.setdefault("reduce_range", True)
    return quantization.quantize_static(source, target, reader, **options)


def quantize_dynamic(source, target, **options):
    """onnxruntime's quantize_dynamic, with 7-bit weights where its kernels saturate (above)."""
    from onnxruntime import quantization

    if u8s8_saturates():
        options.setdefault("reduce_range", True)
    return quantization.quantize_dynamic(source, target, **options)


def calibration_reader(x, batch=16):
    """An onnxruntime.quantization.CalibrationDataReader over ``x`` in batches, input "x"."""
    from onnxruntime.quantization import CalibrationDataReader

    class Batches(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": x[i:i + batch]} for i in range(0, len(x), batch)])

        def get_next(self):
            return next(self.batches, None)

    return Batches()


def lenet_onnx():
    """The bundled digits LeNet as ONNX: Conv, BatchNormalization, Relu, MaxPool, Flatten, Gemm."""
    native = bundled_model()
    layers = native.layers
    init, nodes = {}, []
    prev = "x"
    for name in ("conv1", "conv2"):
        conv, bn = layers[name], layers["bn" + name[-1]]
        init[f"{name}.w"], init[f"{name}.b"] = conv.weight, conv.bias
        nodes.append(helper.make_node("Conv", [prev, f"{name}.w", f"{name}.b"], [name],
                                      name=name, kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        bn_name = "bn" + name[-1]
        for p in ("weight", "bias", "running_mean", "running_var"):
            init[f"{bn_name}.{p}"] = getattr(bn, p)
        nodes.append(helper.make_node(
            "BatchNormalization", [name] + [f"{bn_name}.{p}" for p in
                                            ("weight", "bias", "running_mean", "running_var")],
            [bn_name], name=bn_name, epsilon=bn.eps))
        relu, pool = "relu" + name[-1], "pool" + name[-1]
        nodes.append(helper.make_node("Relu", [bn_name], [relu], name=relu))
        nodes.append(helper.make_node("MaxPool", [relu], [pool], name=pool,
                                      kernel_shape=[2, 2], strides=[2, 2]))
        prev = pool
    nodes.append(helper.make_node("Flatten", [prev], ["flatten"], name="flatten", axis=1))
    for name, src in (("fc1", "flatten"), ("fc2", "relu3")):
        fc = layers[name]
        init[f"{name}.w"], init[f"{name}.b"] = fc.weight, fc.bias
        nodes.append(helper.make_node("Gemm", [src, f"{name}.w", f"{name}.b"], [name],
                                      name=name, transB=1))
        if name == "fc1":
            nodes.append(helper.make_node("Relu", ["fc1"], ["relu3"], name="relu3"))
    return make_model(nodes, [("x", ["N", 1, 8, 8])], [("fc2", ["N", 10])], init)
