"""ONNX nodes -> nn layers: the float graph of an imported model.

Conv, Gemm and MatMul with constant weights become ``nn.Conv2d`` /
``nn.Linear`` (their products go through the multiplier); BatchNormalization,
Relu, Clip(0, 6), MaxPool, GlobalAveragePool, Flatten and same-shape Add
become the nn layers the quantized graph fuses and runs on codes; every other
supported op is an ONNX float node (:mod:`._float_ops`). Dimension 0 is the
batch: an op that mixes it into other dimensions is refused.
"""

from __future__ import annotations

import numpy as np

from .. import nn
from ..errors import ModelError
from . import _float_ops as F
from ._dynamic import DynamicOps
from ._quantized import QuantizedOps
from ._reader import MAX_TENSOR_BYTES, import_onnx

#: ops that only produce constants once their inputs are constant
FOLDABLE = {"Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Reshape",
            "ConstantOfShape", "Slice", "Add", "Sub", "Mul", "Div", "Range", "Identity",
            "Transpose", "Size", "Flatten", "Expand", "Equal", "Where", "Neg", "Sqrt", "Floor",
            "Ceil", "ReduceProd", "Min", "Max", "Tile", "Dropout", "Abs"}

UNARY = {"Sigmoid": F.sigmoid, "Tanh": np.tanh, "Exp": np.exp, "Abs": np.abs, "Neg": np.negative,
         "Sqrt": np.sqrt, "Log": np.log, "Reciprocal": np.reciprocal, "Floor": np.floor,
         "Ceil": np.ceil}
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
          "Pow": np.power, "Max": np.maximum, "Min": np.minimum}


def attributes(node):
    onnx = import_onnx()
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


#: ops of the com.microsoft domain that ONNX Runtime's quantizer emits and we map
MICROSOFT_OPS = {"QGemm", "QLinearAdd", "QLinearAveragePool", "QLinearConcat",
                 "QLinearGlobalAveragePool", "QLinearLeakyRelu", "QLinearMul", "QLinearSigmoid",
                 "QLinearSoftmax"}


class Translator(QuantizedOps, DynamicOps):
    """Builds the (name, layer, inputs) list of an nn.Model from ONNX nodes in order."""

    def __init__(self, constants, input_name, input_shape, opset, batch):
        self.constants = constants            # tensor name -> np.ndarray
        self.source = {input_name: nn.INPUT}  # tensor name -> nn node producing it
        self.shapes = {nn.INPUT: tuple(input_shape)}  # nn node -> per-sample shape
        self.opset, self.batch = opset, batch
        self.nodes, self.unsupported = [], []
        self._names = {nn.INPUT}
        self._q_init()
        self._dynamic_init()

    # ---- helpers ----
    def is_const(self, name):
        return name == "" or name in self.constants

    def const(self, node, index, default=None):
        if index >= len(node.input) or node.input[index] == "":
            return default
        name = node.input[index]
        if name not in self.constants:
            raise ModelError(f"input {index} ({name!r}) must be a constant (an initializer)")
        return self.constants[name]

    def shape_of(self, tensor):
        return self.shapes[self.source[tensor]]

    def layer_of(self, tensor):
        name = self.source[tensor]
        return next((layer for n, layer, _ in self.nodes if n == name), None)

    def unique(self, base):
        name, k = base, 1
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name

    def add(self, base, layer, inputs, output=None):
        """Append a layer reading nn nodes ``inputs``; ``output`` (ONNX tensor) maps to it."""
        name = self.unique(base)
        shape = layer.output_shape(*(self.shapes[s] for s in inputs))
        self.nodes.append((name, layer, list(inputs)))
        self.shapes[name] = tuple(shape)
        if output is not None:
            self.source[output] = name
        return name

    def float_op(self, node, fn, name=None, shape_only=False, detail=None, first_only=False):
        """An OnnxFloatOp over the node's activation inputs, constants bound in place.

        ``first_only``: the other inputs (shapes, axes, pads) were read at import.
        """
        inputs = node.input[:1] if first_only else node.input
        slots = [np.asarray(self.constants[s], np.float32)
                 if s in self.constants and s else None for s in inputs]
        acts = [self.source[s] for s in inputs if s and s not in self.constants]
        if not acts:
            raise ModelError("has no activation input")
        cls = F.ShapeOp if shape_only else F.OnnxFloatOp
        layer = cls(node.op_type, F.bind(fn, slots), len(acts), detail)
        return self.add(name or self.base(node), layer, acts, node.output[0])

    @staticmethod
    def base(node):
        return node.name or f"{node.op_type.lower()}_{node.output[0]}"

    # ---- constant folding ----
    def fold(self, node):
        onnx = import_onnx()
        from onnx.reference import ReferenceEvaluator

        if node.op_type == "Shape":  # of an activation: its static shape, batch as declared
            full = np.array((self.batch, *self.shape_of(node.input[0])), np.int64)
            a = attributes(node)
            self.constants[node.output[0]] = full[a.get("start", 0):a.get("end", len(full))]
            return
        if node.op_type == "ConstantOfShape":
            shape = np.asarray(self.const(node, 0)).astype(np.int64)
            if np.any(shape < 0) or int(np.prod(shape)) * 8 > MAX_TENSOR_BYTES:
                raise ModelError(f"ConstantOfShape declares shape {shape.tolist()}, too large")
        if node.op_type == "DequantizeLinear":  # the codes are kept too
            return self.note_folded_dq(node)
        feeds = {s: self.constants[s] for s in node.input if s}
        helper = onnx.helper
        graph = helper.make_graph(
            [node], "fold", [helper.make_tensor_value_info(s, 0, None) for s in feeds],
            [helper.make_tensor_value_info(s, 0, None) for s in node.output if s])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            outs = ReferenceEvaluator(model).run(None, feeds)
        except Exception as error:  # the reference evaluator raises many types
            raise ModelError(f"cannot fold constant node: {type(error).__name__}: {error}") \
                from None
        for name, value in zip(node.output, outs):
            if name:
                self.constants[name] = np.asarray(value)

    # ---- translation ----
    def supports(self, node):
        ours = node.domain in ("", "ai.onnx") or (node.domain == "com.microsoft" and
                                                  node.op_type in MICROSOFT_OPS)
        return ours and hasattr(self, "op_" + node.op_type)

    def translate(self, node):
        if not self.supports(node):
            self.unsupported.append(node)
            return
        try:
            self.check_dynamic_reads(node)
            getattr(self, "op_" + node.op_type)(node, attributes(node))
        except ModelError as error:
            raise ModelError(f"{node.op_type} node {self.base(node)!r}: {error}") from None

    def alias(self, node):
        self.source[node.output[0]] = self.source[node.input[0]]

    op_Identity = op_Dropout = lambda self, node, a: self.alias(node)

    def op_Conv(self, node, a):
        src = self.source[node.input[0]]
        name = self.conv_layer(node, a, src, self.const(node, 1), self.const(node, 2))
        weight = self.given_weight(node.input[1])
        if weight is not None:  # QDQ: the weight's own codes
            self.record_given(name, src, weight, node.input[2] if len(node.input) > 2 else "",
                              self.const(node, 2))

    def conv_layer(self, node, a, src, w, b, wrap=None):
        """The nn.Conv2d of an ONNX Conv (after a zero Pad if its pads are asymmetric);
        ``wrap`` turns it into the layer added (a dynamically quantized one)."""
        if w.ndim != 4:
            raise ModelError(f"only 2-D convolutions are supported (weight {w.shape})")
        shape = self.shapes[src]
        k = w.shape[2:]
        strides = a.get("strides", [1, 1])
        dil = a.get("dilations", [1, 1])
        pads = self.pads(a, shape[1:], k, strides, dil)
        if pads[:2] != pads[2:]:  # asymmetric: an explicit zero Pad first
            widths = ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3]))
            src = self.add(self.base(node) + "_pad", F.ZeroPad(widths), [src])
            pads = [0, 0, 0, 0]
        group = int(a.get("group", 1))
        conv = nn.Conv2d(w.shape[1] * group, w.shape[0], k, stride=strides,
                         padding=pads[:2], dilation=dil, groups=group, bias=b is not None,
                         weight=w, bias_value=b)
        return self.add(self.base(node), wrap(conv) if wrap else conv, [src], node.output[0])

    @staticmethod
    def pads(a, hw, kernel, strides, dilations):
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto in ("NOTSET", ""):
            return list(a.get("pads", [0, 0, 0, 0]))
        if auto == "VALID":
            return [0, 0, 0, 0]
        begin, end = [], []
        for n, k, s, d in zip(hw, kernel, strides, dilations):
            total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
            small = total // 2
            begin.append(small if auto == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        return begin + end

    def op_Gemm(self, node, a):
        if a.get("transA", 0):
            raise ModelError("transA=1 on an activation transposes the batch dimension")
        if len(self.shape_of(node.input[0])) != 1:
            raise ModelError("needs a 2-D input (batch, features)")
        weight = self.const(node, 1).astype(np.float64)
        weight = weight if a.get("transB", 0) else weight.T
        weight = weight * a.get("alpha", 1.0)
        c = self.const(node, 2)
        bias = None
        if c is not None:
            c = np.asarray(c, np.float64) * a.get("beta", 1.0)
            if c.ndim == 2 and c.shape[0] != 1:
                raise ModelError(f"bias C of shape {c.shape} varies over the batch")
            bias = np.broadcast_to(c.reshape(-1) if c.ndim else c, (weight.shape[0],))
        layer = nn.Linear(weight.shape[1], weight.shape[0], bias is not None,
                          weight=weight, bias_value=bias)
        src = self.source[node.input[0]]
        name = self.add(self.base(node), layer, [src], node.output[0])
        given = self.given_weight(node.input[1], not a.get("transB", 0), a.get("alpha", 1.0))
        if given is not None:
            if a.get("beta", 1.0) != 1.0:
                raise ModelError("beta != 1 with a quantized bias is not supported")
            self.record_given(name, src, given, node.input[2] if len(node.input) > 2 else "",
                              bias)

    def op_MatMul(self, node, a):
        left, right = node.input
        if self.is_const(left):
            raise ModelError("a constant left operand (weight @ activation) is not supported")
        if not self.is_const(right):  # two activations: both operands through the multiplier
            return self.add(self.base(node), nn.MatMul(), [self.source[left], self.source[right]],
                            node.output[0])
        w = self.const(node, 1)
        if w.ndim != 2:
            raise ModelError(f"a constant weight must be 2-D, got {w.shape}")
        layer = nn.Linear(w.shape[0], w.shape[1], False, weight=w.T)
        name = self.add(self.base(node), layer, [self.source[left]], node.output[0])
        given = self.given_weight(right, True)
        if given is not None:
            self.record_given(name, self.source[left], given)

    def op_Relu(self, node, a):
        self.add(self.base(node), nn.ReLU(), [self.source[node.input[0]]], node.output[0])

    def op_Clip(self, node, a):
        lo = a.get("min", self.const(node, 1, -np.inf))
        hi = a.get("max", self.const(node, 2, np.inf))
        lo, hi = float(lo), float(hi)
        src = [self.source[node.input[0]]]
        if lo == 0 and hi == 6:
            return self.add(self.base(node), nn.ReLU6(), src, node.output[0])
        if lo == 0 and hi == np.inf:
            return self.add(self.base(node), nn.ReLU(), src, node.output[0])
        layer = F.OnnxFloatOp("Clip", lambda x: np.clip(x, lo, hi))
        self.add(self.base(node), layer, src, node.output[0])

    def op_LeakyRelu(self, node, a):
        alpha = float(a.get("alpha", 0.01))
        self.float_op(node, lambda x: np.where(x >= 0, x, alpha * x))

    def unary(self, node, a):
        self.float_op(node, UNARY[node.op_type])

    op_Sigmoid = op_Tanh = op_Exp = op_Sqrt = op_Log = op_Reciprocal = op_Neg = op_Abs = unary

    def binary(self, node, a):
        if self.dynamic_binary(node):
            return
        acts = [s for s in node.input if not self.is_const(s)]
        if node.op_type == "Add" and len(acts) == 2 and \
                self.shape_of(acts[0]) == self.shape_of(acts[1]):
            return self.add(self.base(node), nn.Add(), [self.source[s] for s in acts],
                            node.output[0])
        if node.op_type in F.BinaryOp.ARITHMETIC and acts:
            return self.quantizable_binary(node, acts)
        self.float_op(node, BINARY[node.op_type])

    op_Add = op_Sub = op_Mul = op_Div = op_Pow = op_Max = op_Min = binary

    def op_Sum(self, node, a):
        self.float_op(node, lambda *xs: sum(xs[1:], xs[0]))

    def pool(self, node, a, kind):
        shape = self.shape_of(node.input[0])
        if len(shape) != 3:
            raise ModelError(f"only 2-D pooling is supported (input {shape})")
        k = tuple(a["kernel_shape"])
        strides = tuple(a.get("strides", [1, 1]))
        dil = tuple(a.get("dilations", [1, 1]))
        pads = self.pads(a, shape[1:], k, strides, dil)
        ceil = bool(a.get("ceil_mode", 0))
        include = bool(a.get("count_include_pad", 0))
        src = [self.source[node.input[0]]]
        simple = pads[:2] == pads[2:] and not ceil and dil == (1, 1) and \
            all(p <= kk // 2 for p, kk in zip(pads, k))
        if simple and kind == "max":
            layer = nn.MaxPool2d(k, strides, pads[:2])
        elif simple:
            layer = nn.AvgPool2d(k, strides, pads[:2], count_include_pad=include)
        else:
            layer = F.OnnxFloatOp(node.op_type, F.window_pool(kind, k, strides, pads, dil, ceil,
                                                              include))
        return self.add(self.base(node), layer, src, node.output[0]), layer

    def op_MaxPool(self, node, a):
        if len(node.output) > 1 and node.output[1]:
            raise ModelError("the Indices output is not supported")
        self.pool(node, a, "max")

    def op_AveragePool(self, node, a):
        self.pool(node, a, "avg")

    def op_GlobalAveragePool(self, node, a):
        shape = self.shape_of(node.input[0])
        if len(shape) != 3:
            raise ModelError(f"needs (C, H, W) inputs, got {shape}")
        pool = nn.GlobalAvgPool()
        mean = self.add(self.base(node) + "_mean", pool, [self.source[node.input[0]]])
        layer = F.ShapeOp("Reshape", lambda x: x.reshape(*x.shape, 1, 1), 1, "to (C, 1, 1)")
        self.pool_means[self.add(self.base(node), layer, [mean], node.output[0])] = (mean, pool)

    def op_GlobalMaxPool(self, node, a):
        self.float_op(node, lambda x: x.max(axis=tuple(range(2, x.ndim)), keepdims=True))

    def op_BatchNormalization(self, node, a):
        gamma, beta, mean, var = (self.const(node, i) for i in range(1, 5))
        shape = self.shape_of(node.input[0])
        eps = float(a.get("epsilon", 1e-5))
        after_conv = isinstance(self.layer_of(node.input[0]), nn.Conv2d)
        if len(shape) == 3 and after_conv:  # folded into the convolution when quantized
            layer = nn.BatchNorm2d(shape[0], eps, weight=gamma, bias=beta, running_mean=mean,
                                   running_var=var)
            return self.add(self.base(node), layer, [self.source[node.input[0]]], node.output[0])
        scale = gamma / np.sqrt(var + eps)
        shift = beta - mean * scale
        view = (-1,) + (1,) * (len(shape) - 1)
        self.float_op(node, lambda x: x * scale.reshape(view) + shift.reshape(view),
                      first_only=True)

    def op_Softmax(self, node, a, opset=None):
        rank = len(self.shape_of(node.input[0])) + 1
        old = (opset or self.opset) < 13  # softmax over the flattened trailing axes
        axis = a.get("axis", 1 if old else -1) % rank
        if axis == 0:
            raise ModelError("axis 0 is the batch")
        return self.add(self.base(node), F.SoftmaxOp(axis, old), [self.source[node.input[0]]],
                        node.output[0])

    def op_LRN(self, node, a):
        size, alpha = int(a["size"]), float(a.get("alpha", 1e-4))
        beta, bias = float(a.get("beta", 0.75)), float(a.get("bias", 1.0))
        self.float_op(node, lambda x: F.lrn(x, size, alpha, beta, bias))

    def op_Concat(self, node, a):
        rank = len(self.shape_of(next(s for s in node.input if not self.is_const(s)))) + 1
        axis = a["axis"] % rank
        if axis == 0:
            raise ModelError("concatenates along the batch")
        self.float_op(node, lambda *xs: np.concatenate(
            [np.broadcast_to(x, (xs[0].shape[0], *x.shape[1:])) for x in xs], axis=axis))

    def op_Flatten(self, node, a):
        rank = len(self.shape_of(node.input[0])) + 1
        if a.get("axis", 1) % rank != 1:
            raise ModelError(f"axis {a.get('axis')} folds the batch into another dimension")
        self.add(self.base(node), nn.Flatten(), [self.source[node.input[0]]], node.output[0])

    def op_Reshape(self, node, a):
        target = [int(v) for v in self.const(node, 1)]
        shape = (self.batch, *self.shape_of(node.input[0]))
        if not a.get("allowzero", 0):
            target = [shape[i] if v == 0 else v for i, v in enumerate(target)]
        try:
            full = np.empty(shape, dtype=np.bool_).reshape(target).shape
        except ValueError as error:
            raise ModelError(f"cannot reshape {list(shape)} to {target}: {error}") from None
        if full[0] != self.batch:
            raise ModelError(f"reshaping {list(shape)} to {target} mixes the batch dimension")
        rest = full[1:]
        self.float_op(node, lambda x: x.reshape(x.shape[0], *rest), shape_only=True, first_only=True)

    def op_Transpose(self, node, a):
        rank = len(self.shape_of(node.input[0])) + 1
        perm = list(a.get("perm", range(rank - 1, -1, -1)))
        if perm[0] != 0:
            raise ModelError(f"perm {perm} moves the batch dimension")
        self.float_op(node, lambda x: x.transpose(perm), shape_only=True, first_only=True)

    def axes(self, node, a, rank):
        axes = a.get("axes")
        if axes is None and len(node.input) > 1:
            axes = self.const(node, 1)
        if axes is None:
            return None
        axes = sorted(int(v) % rank for v in np.ravel(axes))
        if 0 in axes:
            raise ModelError("axis 0 is the batch")
        return axes

    def op_Squeeze(self, node, a):
        shape = self.shape_of(node.input[0])
        axes = self.axes(node, a, len(shape) + 1)
        if axes is None:
            axes = [i + 1 for i, s in enumerate(shape) if s == 1]
        self.float_op(node, lambda x: np.squeeze(x, axis=tuple(axes)), shape_only=True, first_only=True)

    def op_Unsqueeze(self, node, a):
        rank = len(self.shape_of(node.input[0])) + 1
        raw = a.get("axes", self.const(node, 1))
        axes = sorted(int(v) % (rank + len(np.ravel(raw))) for v in np.ravel(raw))
        if 0 in axes:
            raise ModelError("axis 0 is the batch")
        self.float_op(node, lambda x: np.expand_dims(x, tuple(axes)), shape_only=True, first_only=True)

    def op_Pad(self, node, a):
        rank = len(self.shape_of(node.input[0])) + 1
        pads = a.get("pads")
        if pads is None:
            pads = self.const(node, 1)
        pads = [int(v) for v in np.ravel(pads)]
        value = a.get("value", None)
        if value is None:
            value = self.const(node, 2, np.float32(0))
        value = float(np.ravel(value)[0]) if np.size(value) else 0.0
        if len(node.input) > 3 and node.input[3]:
            raise ModelError("the axes input is not supported")
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if len(pads) != 2 * rank or pads[0] or pads[rank]:
            raise ModelError(f"pads {pads} pad the batch or do not match rank {rank}")
        if min(pads) < 0:
            raise ModelError(f"negative pads {pads} are not supported")
        widths = list(zip(pads[:rank], pads[rank:]))
        mode = {"constant": "constant", "reflect": "reflect", "edge": "edge"}.get(mode)
        if mode is None:
            raise ModelError(f"mode {a.get('mode')!r} is not supported")
        kw = {"constant_values": value} if mode == "constant" else {}
        self.float_op(node, lambda x: np.pad(x, widths, mode=mode, **kw), first_only=True)
