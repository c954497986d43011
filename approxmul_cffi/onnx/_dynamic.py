"""Dynamic quantization (``onnxruntime.quantization.quantize_dynamic``).

Such a graph quantizes each activation batch on its own range and keeps
float everywhere else::

    x -> DynamicQuantizeLinear -> (codes, s_x, z_x)
    Mul(s_x, s_w) -> scales
    ConvInteger | MatMulInteger(codes, weight codes, z_x, z_w) -> Cast(float) -> Mul(scales)

The whole chain becomes one :class:`~approxmul_cffi.nn.DynamicQuantized`
layer named after the ConvInteger/MatMulInteger node, reading ``x``; the
layer recomputes the grid per batch, so the ``--layer`` names are the
integer nodes' names. Any other use of the chain's intermediate tensors is
an error naming the node.
"""

from __future__ import annotations

import numpy as np

from .. import nn
from ..errors import ModelError

#: intermediate tensor kind -> the ops that may read it
READERS = {"codes": ("ConvInteger", "MatMulInteger"),
           "zero_point": ("ConvInteger", "MatMulInteger"),
           "scale": ("Mul",), "scales": ("Mul",), "acc": ("Cast",), "acc_float": ("Mul",)}
FLOAT = 1  # TensorProto.FLOAT


class DynamicOps:
    """Mixin of the Translator: the dynamic-quantization chain."""

    def _dynamic_init(self):
        self.dynamic = {}          # ONNX tensor -> (kind, nn node of the float input, extra)
        self.dynamic_layers = {}   # nn node -> its DynamicQuantized layer, scaled or not

    def check_dynamic_reads(self, node):
        for s in node.input:
            kind = self.dynamic.get(s, (None,))[0]
            if kind is not None and node.op_type not in READERS[kind]:
                raise ModelError(f"reads {s!r}, an intermediate of dynamic quantization; only "
                                 f"{' and '.join(READERS[kind])} may (the chain "
                                 "quantize_dynamic writes: docs/onnx.md)")

    def _record(self, tensor, kind, src, extra=None):
        self.dynamic[tensor] = (kind, src, extra)
        self.source[tensor] = src  # present for the importer; check_dynamic_reads guards it

    def _expect(self, tensor, kind, src=None):
        got = self.dynamic.get(tensor)
        if got is None or got[0] != kind or (src is not None and got[1] != src):
            raise ModelError(f"input {tensor!r} is not the {kind.replace('_', ' ')} of the "
                             "DynamicQuantizeLinear that quantized its operand")
        return got

    def op_DynamicQuantizeLinear(self, node, a):
        src = self.source[node.input[0]]
        for tensor, kind in zip(node.output, ("codes", "scale", "zero_point")):
            if tensor:
                self._record(tensor, kind, src)

    def _integer_layer(self, node, codes_of):
        _, src, _ = self._expect(node.input[0], "codes")
        if len(node.input) > 2 and node.input[2]:
            self._expect(node.input[2], "zero_point", src)
        w = self.const(node, 1)
        if w.dtype not in (np.int8, np.uint8):
            raise ModelError(f"weight codes must be int8 or uint8, got {w.dtype}")
        w_zp = self.const(node, 3, np.zeros((), w.dtype))

        def wrap(layer):
            return nn.DynamicQuantized(layer, codes_of(w), None, w_zp)
        return src, w, wrap

    def op_ConvInteger(self, node, a):
        src, w, wrap = self._integer_layer(node, lambda w: w)
        name = self.conv_layer(node, a, src, w.astype(np.float64), None, wrap=wrap)
        self._integer_output(node, name, src)

    def op_MatMulInteger(self, node, a):
        src, w, wrap = self._integer_layer(node, lambda w: np.ascontiguousarray(w.T))
        if w.ndim != 2:
            raise ModelError(f"constant weight codes must be 2-D, got {w.shape}")
        layer = wrap(nn.Linear(w.shape[0], w.shape[1], False, weight=w.T.astype(np.float64)))
        name = self.add(self.base(node), layer, [src], node.output[0])
        self._integer_output(node, name, src)

    def _integer_output(self, node, name, src):
        self.dynamic_layers[name] = self.layer_of(node.output[0])
        self._record(node.output[0], "acc", name, src)

    def op_Cast(self, node, a):
        kind = self.dynamic.get(node.input[0], (None,))[0]
        if a.get("to") != FLOAT:
            raise ModelError(f"a Cast of an activation to type {a.get('to')} (only to float)")
        if kind is None:
            return self.alias(node)
        _, name, src = self.dynamic[node.input[0]]
        self._record(node.output[0], "acc_float", name, src)

    def dynamic_binary(self, node):
        """Handles a Mul of the chain; False for any other node."""
        kinds = [self.dynamic.get(s, (None,))[0] for s in node.input]
        if node.op_type != "Mul" or kinds == [None, None]:
            return False
        if "scale" in kinds:  # s_x times the weight's constant scale
            scale_in = node.input[kinds.index("scale")]
            other = node.input[1 - kinds.index("scale")]
            if not self.is_const(other):
                raise ModelError("multiplies a dynamic scale by a non-constant")
            w_scale = np.asarray(self.constants[other], np.float32)
            self._record(node.output[0], "scales", self.dynamic[scale_in][1], w_scale)
            return True
        if sorted(kinds, key=str) != ["acc_float", "scales"]:
            raise ModelError("does not scale an integer product by its scales (Mul of the "
                             "Cast accumulators and Mul(s_x, s_w))")
        acc = node.input[kinds.index("acc_float")]
        _, name, src = self.dynamic[acc]
        _, _, w_scale = self._expect(node.input[kinds.index("scales")], "scales", src)
        layer = self.dynamic_layers[name]
        if layer.scale is not None:
            raise ModelError(f"scales the output of {name!r} twice")
        layer.scale = w_scale
        self.source[node.output[0]] = name
        return True

    def finish_dynamic(self):
        unscaled = [n for n, layer in self.dynamic_layers.items() if layer.scale is None]
        if unscaled:
            raise ModelError(f"integer node(s) {', '.join(map(repr, unscaled))}: the int32 "
                             "accumulators are not Cast to float and multiplied by the input's "
                             "and weight's scales (the chain quantize_dynamic writes)")
