"""Quantized ONNX graphs (QDQ and QOperator): their own scales, zero points and weight codes.

QuantizeLinear/DequantizeLinear on activations become no nodes at all: they
give the grid (QParams) of the nn node whose output they quantize.
DequantizeLinear of a constant is folded, but its codes and QParams are kept,
so Conv/Gemm/MatMul reading it take those codes as given weights (and int32
biases). QLinearConv, QLinearMatMul and QGemm (com.microsoft) become the
same Conv2d/Linear/MatMul layers with given weights and grids; the other
QLinear ops become the nn or float node their QDQ form gives, with their
grids: Add, Mul, pools and Softmax compute ONNX Runtime's arithmetic for
them (requant_float), and ops ONNX Runtime runs as lookup tables (Sigmoid,
LeakyRelu, Concat) are the float op between grids (docs/onnx.md). The result
is a :class:`GivenQuantization` that ``nn.quantize`` uses instead of
calibrating, with ONNX Runtime's requantization arithmetic by default.
"""

from __future__ import annotations

import dataclasses
import types

import numpy as np

from .. import nn, quant
from ..errors import ModelError
from . import _float_ops as F


@dataclasses.dataclass
class GivenQuantization:
    """What a pre-quantized model fixes: every node's grid, weight codes, the arithmetic."""

    qparams: dict   # nn node name (and nn.INPUT) -> QParams of its output
    weights: dict   # layer name -> (weight codes, weight QParams, int32 bias)
    config: quant.QuantConfig
    tensors: dict   # ONNX integer tensor name -> nn node whose output codes it is


def qparams_of(scale, zero_point, axis=None, rank=None):
    scale = np.asarray(scale, np.float64)
    zp = np.zeros(scale.shape, np.uint8) if zero_point is None else np.asarray(zero_point)
    if zp.dtype not in (np.int8, np.uint8):
        raise ModelError(f"zero point type {zp.dtype} is not supported (int8 or uint8 only)")
    if scale.ndim == 0:
        return quant.QParams(scale, zp.astype(np.int64), signed=zp.dtype == np.int8)
    axis = 1 if axis is None else int(axis) % rank
    return quant.QParams(scale, zp.astype(np.int64), signed=zp.dtype == np.int8, axis=axis)


class QuantizedOps:
    """Mixin of the Translator: the quantized operators and the grid bookkeeping."""

    quantized = False
    qoperator = False  # QLinear*/QGemm nodes (QOperator format), not only QDQ pairs

    def _q_init(self):
        self.grids, self.given, self.dq_consts = {}, {}, {}
        self.quantized_tensors = {}  # ONNX integer tensor -> nn node holding its codes
        self.pool_means = {}  # GlobalAveragePool's (C, 1, 1) reshape -> (its mean node, layer)

    def set_grid(self, nn_name, qp):
        self.quantized = True
        old = self.grids.get(nn_name)
        if old is not None and (old.to_dict() != qp.to_dict()):
            raise ModelError(f"{nn_name!r} is quantized with two different grids")
        self.grids[nn_name] = qp

    def note_folded_dq(self, node):
        """Keep the codes and QParams of a folded DequantizeLinear of a constant."""
        codes = self.constants[node.input[0]]
        scale = self.constants[node.input[1]]
        zp = self.constants.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        self.dq_consts[node.output[0]] = (codes, scale, zp, axis)
        self.quantized = True
        codes = np.asarray(codes)
        if codes.dtype.kind not in "iu":
            raise ModelError(f"DequantizeLinear of {codes.dtype} values is not supported")
        scale = np.asarray(scale, np.float32)
        shape = [1] * codes.ndim
        if scale.ndim and codes.ndim:
            shape[axis % codes.ndim] = -1
        centered = codes.astype(np.int64) - (0 if zp is None else np.asarray(zp, np.int64)
                                             .reshape(shape if np.ndim(zp) else ()))
        self.constants[node.output[0]] = (centered.astype(np.float32) *
                                          scale.reshape(shape if scale.ndim else ()))

    def op_QuantizeLinear(self, node, a):
        src = self.source[node.input[0]]
        qp = qparams_of(self.const(node, 1), self.const(node, 2), a.get("axis"))
        if qp.per_channel:
            raise ModelError("per-axis activation quantization is not supported")
        self.set_grid(src, qp)
        self.source[node.output[0]] = src
        self.quantized_tensors[node.output[0]] = src

    def op_DequantizeLinear(self, node, a):
        src = self.source[node.input[0]]
        qp = qparams_of(self.const(node, 1), self.const(node, 2), a.get("axis"))
        self.set_grid(src, qp)
        self.source[node.output[0]] = src

    def given_weight(self, name, transpose=False, alpha=1.0):
        """(codes, QParams) of a DequantizeLinear'd constant weight, or None."""
        if name not in self.dq_consts:
            return None
        codes, scale, zp, axis = self.dq_consts[name]
        if alpha != 1.0:
            raise ModelError("alpha != 1 on quantized weights is not supported")
        return self.weight_codes(codes, scale, zp, axis, transpose)

    @staticmethod
    def weight_codes(codes, scale, zp, axis, transpose):
        codes = np.asarray(codes)
        qp = qparams_of(scale, zp, axis, codes.ndim)
        if transpose:  # ONNX (in, out) -> Linear's (out, in); a per-channel axis follows
            codes = codes.T
            if qp.per_channel:
                qp = dataclasses.replace(qp, axis=1 - qp.axis)
        if qp.per_channel and qp.axis != 0:
            raise ModelError(f"per-axis weight scales along axis {qp.axis} are not per output "
                             "channel")
        return np.ascontiguousarray(codes), qp

    def record_given(self, nn_name, src, weight, bias_name="", float_bias=None, out=None,
                     bias_codes=None):
        """Given weights of layer ``nn_name`` reading nn node ``src`` (its input grid)."""
        in_qp = self.grids.get(src)
        if in_qp is None:
            raise ModelError("its input has no quantization grid (no QuantizeLinear)")
        codes, w_qp = weight
        if np.unique(w_qp.zero_point).size != 1:  # refused here, not at the first run
            raise ModelError("per-channel weights with different zero points (the kernels take "
                             "one per tensor): quantize the weights as int8, whose per-channel "
                             "zero points are all 0 (weight_type=QuantType.QInt8)")
        if bias_codes is None and bias_name and bias_name in self.dq_consts:
            bias_codes = self.dq_consts[bias_name][0]
        if bias_codes is None:
            bias_codes = (np.zeros(1, np.int64) if float_bias is None else
                          quant.quantize_bias(float_bias, float(in_qp.scale), w_qp.scale))
        bias = np.broadcast_to(np.asarray(bias_codes, np.int64), (codes.shape[0],)).copy()
        self.given[nn_name] = (codes, w_qp, bias)
        if out is not None:
            self.set_grid(nn_name, out)

    # ---- QOperator ----
    def q_input(self, node, index):
        self.qoperator = True
        src = self.source[node.input[index]]
        qp = qparams_of(self.const(node, index + 1), self.const(node, index + 2))
        self.set_grid(src, qp)
        return src, qp

    def op_QLinearConv(self, node, a):
        src, x_qp = self.q_input(node, 0)
        codes, w_qp = self.weight_codes(self.const(node, 3), self.const(node, 4),
                                        self.const(node, 5), 0, False)
        out_qp = qparams_of(self.const(node, 6), self.const(node, 7))
        bias = self.const(node, 8)
        float_bias = None if bias is None else bias * float(x_qp.scale) * w_qp.scale
        name = self.conv_layer(node, a, src, w_qp.dequantize(codes), float_bias)
        self.record_given(name, src, (codes, w_qp), out=out_qp, bias_codes=bias)
        self.quantized_tensors[node.output[0]] = name

    def linear_given(self, node, src, codes, w_qp, out_qp, bias=None):
        float_bias = None
        if bias is not None:
            float_bias = np.broadcast_to(bias * float(self.grids[src].scale) * w_qp.scale,
                                         (codes.shape[0],))
        layer = nn.Linear(codes.shape[1], codes.shape[0], bias is not None,
                          weight=w_qp.dequantize(codes), bias_value=float_bias)
        name = self.add(self.base(node), layer, [src], node.output[0])
        self.record_given(name, src, (codes, w_qp), out=out_qp, bias_codes=bias)
        self.quantized_tensors[node.output[0]] = name

    def op_QLinearMatMul(self, node, a):
        src, _ = self.q_input(node, 0)
        out_qp = qparams_of(self.const(node, 6), self.const(node, 7))
        if not self.is_const(node.input[3]):
            other, _ = self.q_input(node, 3)
            name = self.add(self.base(node), nn.MatMul(), [src, other], node.output[0])
            self.quantized_tensors[node.output[0]] = name
            return self.set_grid(name, out_qp)
        codes, w_qp = self.weight_codes(self.const(node, 3), self.const(node, 4),
                                        self.const(node, 5), 1, True)
        self.linear_given(node, src, codes, w_qp, out_qp)

    def op_QGemm(self, node, a):
        if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0:
            raise ModelError("transA or alpha != 1 is not supported")
        if len(node.input) < 8 or not node.input[7]:
            raise ModelError("a float output (no y_scale) is not supported")
        src, _ = self.q_input(node, 0)
        trans = not a.get("transB", 0)
        codes, w_qp = self.weight_codes(self.const(node, 3), self.const(node, 4),
                                        self.const(node, 5), 0 if not trans else 1, trans)
        out_qp = qparams_of(self.const(node, 7), self.const(node, 8))
        self.linear_given(node, src, codes, w_qp, out_qp, self.const(node, 6))

    def op_QLinearAdd(self, node, a):
        # a residual add (nn.Add), or an add that broadcasts or reads a constant (the Add
        # float node); both run ONNX Runtime's arithmetic (requant_float.qlinear_add)
        self.q_float(node, a, "Add", [0, 3], 6)

    def q_pool(self, node, a, build):
        """QLinear(Global)AveragePool: ``build()`` makes the float pool, whose mean node and
        layer then requantize to the op's output grid (nn's ``requantize=True``)."""
        if a.get("channels_last", 0):
            raise ModelError("channels_last=1 is not supported (NCHW only)")
        self.q_input(node, 0)
        mean, layer = build()
        layer.requantize = True
        self.set_grid(mean, qparams_of(self.const(node, 3), self.const(node, 4)))
        self.quantized_tensors[node.output[0]] = self.source[node.output[0]]

    def op_QLinearAveragePool(self, node, a):
        def build():
            name, layer = self.pool(node, a, "avg")
            if not isinstance(layer, nn.AvgPool2d):
                raise ModelError("only windows nn.AvgPool2d computes are supported (no ceil "
                                 "mode, symmetric pads of at most half the kernel)")
            return name, layer
        self.q_pool(node, a, build)

    def op_QLinearGlobalAveragePool(self, node, a):
        def build():
            self.op_GlobalAveragePool(node, a)
            return self.pool_means[self.source[node.output[0]]]
        self.q_pool(node, a, build)

    def op_QLinearConcat(self, node, a):
        # ONNX Runtime requantizes each input through a table of dequantize -> QuantizeLinear,
        # which is what a float node between grids computes (docs/quantization.md)
        tensors = node.input[2::3]
        if any(self.is_const(t) for t in tensors):
            raise ModelError("QLinearConcat of a constant is not supported (activations only)")
        self.q_float(node, a, "Concat", range(2, len(node.input), 3), 0)

    def q_float(self, node, a, op, operands, out_grid):
        """A QLinear op that ONNX Runtime computes as dequantize -> ``op`` -> quantize (a lookup
        table or float arithmetic): the float ``op`` node between the operands' grids and
        ``out_grid`` (input indices of its scale and zero point). ``operands``: input indices
        of code tensors, each followed by its scale and zero point; constants are dequantized."""
        names = []
        for index in operands:
            tensor = node.input[index]
            if self.is_const(tensor):  # ONNX Runtime's DequantizeLinear: float32 s * (q - z)
                codes, scale, zp = (self.const(node, index + i) for i in range(3))
                tensor = self.unique(tensor + "_dequantized")
                self.constants[tensor] = qparams_of(scale, zp).dequantize(
                    np.asarray(codes)).astype(np.float32)
                self.dq_consts[tensor] = (codes, scale, zp, 1)
            else:
                self.q_input(node, index)
            names.append(tensor)
        getattr(self, "op_" + op)(types.SimpleNamespace(op_type=op, name=node.name, input=names,
                                                        output=node.output), a)
        self.q_output(node, out_grid)

    def q_output(self, node, grid):
        """The grid (scale and zero point at input ``grid``) of the op's output node."""
        name = self.source[node.output[0]]
        self.set_grid(name, qparams_of(self.const(node, grid), self.const(node, grid + 1)))
        self.quantized_tensors[node.output[0]] = name

    def quantizable_binary(self, node, acts):
        """ONNX Add/Mul: a float node that knows a quantized constant operand's codes and
        grid, so a quantized graph can run ONNX Runtime's QLinearAdd/QLinearMul on it."""
        constant = None
        consts = [s for s in node.input if self.is_const(s)]
        if len(consts) == 1 and consts[0] in self.dq_consts:
            codes, scale, zp, _ = self.dq_consts[consts[0]]
            if np.ndim(scale) == 0:  # a per-tensor grid, as ONNX Runtime's kernels take
                constant = (np.asarray(codes), qparams_of(scale, zp),
                            list(node.input).index(consts[0]))
        slots = [np.asarray(self.constants[s], np.float32) if s in consts else None
                 for s in node.input]
        fn = {"Add": np.add, "Mul": np.multiply}[node.op_type]
        layer = F.BinaryOp(node.op_type, F.bind(fn, slots), len(acts), constant)
        return self.add(self.base(node), layer, [self.source[s] for s in acts], node.output[0])

    def op_QLinearSigmoid(self, node, a):
        self.q_float(node, a, "Sigmoid", [0], 3)

    def op_QLinearLeakyRelu(self, node, a):
        self.q_float(node, a, "LeakyRelu", [0], 3)

    def op_QLinearMul(self, node, a):
        self.q_float(node, a, "Mul", [0, 3], 6)

    def op_QLinearSoftmax(self, node, a):
        self.q_input(node, 0)
        self.op_Softmax(node, a, opset=a.get("opset", 13))
        self.q_output(node, 3)

    # ---- the grids of every node ----
    def given_quantization(self, model):
        """Complete the grids (shape-only nodes keep their input's) for ``nn.quantize``."""
        # layers whose integer form keeps the input's grid (CodeOp)
        keeps_grid = (F.ShapeOp, nn.MaxPool2d, nn.Flatten, nn.AvgPool2d, nn.GlobalAvgPool,
                      nn.ReLU)
        # DQ -> GlobalAveragePool -> Q: ONNX Runtime runs QLinearGlobalAveragePool, which
        # requantizes the mean to the Q's grid (even to an equal one: ties then go to even)
        for reshape, (mean, pool) in self.pool_means.items():
            if reshape in self.grids and mean not in self.grids:
                self.grids[mean], pool.requantize = self.grids[reshape], True
        # and DQ -> AveragePool -> Q runs as QLinearAveragePool
        for node in model.nodes:
            if isinstance(node.layer, nn.AvgPool2d) and node.name in self.grids:
                node.layer.requantize = True
        grids = {nn.INPUT: self.grids.get(nn.INPUT)}
        if grids[nn.INPUT] is None:
            raise ModelError("the input is never quantized (no QuantizeLinear on it)")
        layers = model.layers
        for node in model.nodes:
            given = self.grids.get(node.name)
            fused = isinstance(node.layer, nn.ReLU) and \
                getattr(layers.get(node.inputs[0]), "takes_multiplier", False)
            requantizes = getattr(node.layer, "requantize", False)  # QLinearGlobalAveragePool
            if isinstance(node.layer, keeps_grid) and not fused and not requantizes:
                inherited = grids[node.inputs[0]]
                if given is None or given.to_dict() == inherited.to_dict():
                    given = inherited
                else:  # ONNX Runtime fuses DQ -> pool -> Q into QLinear kernels we do not mirror
                    raise ModelError(f"{node.name!r} ({type(node.layer).__name__}) changes the "
                                     "quantization grid (QLinearAveragePool-style "
                                     "requantization is not supported)")
            if given is None and node.name != model.output:
                raise ModelError(f"node {node.name!r} ({type(node.layer).__name__}) has no "
                                 "quantization grid: a quantized graph needs QuantizeLinear "
                                 "after it")
            grids[node.name] = given
        if grids[model.output] is None:
            grids[model.output] = grids[model.nodes[-1].inputs[0]]
        if not self.qoperator:
            # ONNX Runtime runs QDQ graphs' int8 activations as uint8 (zero points + 128) on
            # x86-64; integer steps give the same codes in either domain, but the float
            # rounding of QLinearAdd and QLinearAveragePool does not
            grids = {k: None if g is None else g.to_domain(False) for k, g in grids.items()}
        config = quant.QuantConfig(requantization="onnxruntime")
        return GivenQuantization(grids, self.given, config, dict(self.quantized_tensors))
