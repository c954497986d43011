"""Small neural networks: float inference, quantization, integer inference.

A :class:`Model` is a graph of named nodes (a sequence is the common case)
over NumPy float arrays in NCHW layout. :func:`quantize` calibrates it into a
:class:`QuantizedModel`, whose integer inference sends every multiplication
of a Conv2d or Linear layer through an approximate multiplier (one per layer,
assignable by name) and does everything else exactly in integers, as 8-bit
inference hardware would. docs/quantization.md states the arithmetic.

Example:
    >>> import numpy as np
    >>> from approxmul_cffi import nn
    >>> rng = np.random.default_rng(0)
    >>> model = nn.Model((2, 4, 4), [
    ...     ("conv", nn.Conv2d(2, 3, 3, padding=1, weight=rng.normal(size=(3, 2, 3, 3)))),
    ...     ("relu", nn.ReLU()),
    ...     ("pool", nn.GlobalAvgPool()),
    ...     ("fc", nn.Linear(3, 2, weight=rng.normal(size=(2, 3)))),
    ... ])
    >>> x = rng.uniform(size=(5, 2, 4, 4))
    >>> qmodel = nn.quantize(model, x)
    >>> qmodel.layer_names
    ['conv', 'fc']
    >>> bool(np.abs(qmodel.run(x) - model.forward(x)).max() < 0.1)
    True

Files: :mod:`.layers` (layers with weights and the base class),
:mod:`.code_layers` (activations, pooling, reshaping, add),
:mod:`.windows` (sliding windows), :mod:`.graph` (the model graph and its
files), :mod:`.integer` (one layer's integer forward: :class:`QuantizedLayer`,
:class:`QTensor`), :mod:`.quantized` (calibration and the quantized graph),
:mod:`.dynamic` (layers quantized per batch, from ONNX dynamic quantization).
"""

from ..errors import ModelError
from .code_layers import Add, AvgPool2d, Flatten, GlobalAvgPool, MaxPool2d, ReLU, ReLU6, Softmax
from .graph import INPUT, Model, Node, load, save
from .integer import CodeOp, PreparedWeights, QTensor, QuantizedLayer, QuantizedMatMul
from .layers import LAYER_TYPES, BatchNorm2d, Conv2d, Layer, Linear, MatMul, register
from .dynamic import DynamicQuantized
from .quantized import DynamicQuantizedModel, QuantizedModel, RangeObserver, quantize
from .. import quant  # noqa: F401  (nn.quant: the arithmetic the layers use)

__all__ = [
    "Add", "AvgPool2d", "BatchNorm2d", "CodeOp", "Conv2d", "DynamicQuantized",
    "DynamicQuantizedModel", "Flatten", "GlobalAvgPool", "INPUT",
    "LAYER_TYPES", "Layer", "Linear", "MatMul", "MaxPool2d", "Model", "ModelError", "Node",
    "PreparedWeights", "QTensor", "QuantizedLayer", "QuantizedMatMul", "QuantizedModel",
    "RangeObserver", "ReLU",
    "ReLU6", "Softmax", "load", "quantize", "register", "save",
]
