"""The approximate Keras layer's backward, in TensorFlow ops (docs/retraining.md).

The layer computes ``y = s_x s_w[o] acc + b`` on codes, so
``dy/dx = s_w[o] (dM/da(x, w) - z_w)`` and ``dy/dw = s_x (dM/db(x, w) - z_x)``:
a float convolution/matmul whose operands are the codes mapped through
dM/da and dM/db. "ste" takes M = a b (the dequantized operands); "table"
the C library's per-operand slopes (the same tables as the torch adapter);
"table2d" the full 2-D tables, through adapters.table2d_columns in NumPy.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from .. import quant


def _mask(layer, y, dy):
    """The fused ReLU/ReLU6 (the output clamp) passes no gradient where it clamped."""
    if layer.activation not in ("relu", "relu6"):
        return dy
    out_qp = layer._node.output_qparams(bool(layer.multiplier.signed))
    lo, hi = quant.activation_bounds(out_qp, layer.activation)
    keep = y > float(out_qp.dequantize(np.array(lo)))
    if layer.activation == "relu6":
        keep &= y < float(out_qp.dequantize(np.array(hi)))
    return dy * tf.cast(keep, dy.dtype)


def _forward_float(layer, x, w, pad_value):
    """The float layer on mapped operands: conv/matmul whose gradients are the backward."""
    if layer.kind == "dense":
        return tf.tensordot(x, w, 1)
    if layer.kind == "conv1d":
        x, w = x[:, None], w[None]
    (ph, pw), (sh, sw), (dh, dw) = layer.pads, layer.strides, layer.dilation
    # padded taps hold the code z_x, which maps to pad_value, not always 0
    xp = tf.pad(x, [[0, 0], [ph, ph], [pw, pw], [0, 0]], constant_values=pad_value)
    if layer.kind == "depthwise":
        y = tf.nn.depthwise_conv2d(xp, w, [1, sh, sw, 1], "VALID", dilations=(dh, dw))
    else:
        # tf.nn.convolution: dilated convs through space_to_batch, whose CPU backward exists
        y = tf.nn.convolution(xp, w, (sh, sw), "VALID", dilations=(dh, dw))
    return y[:, 0] if layer.kind == "conv1d" else y


def backward(layer, codes, y, dy):
    """(grad_x, grad_kernel, grad_bias) for the layer's upstream gradient ``dy``."""
    dy = _mask(layer, y, dy)
    if layer.gradient == "table2d":
        gx, gw = tf.numpy_function(layer.table2d_backward, [codes, dy], [tf.float32, tf.float32],
                                   stateful=False)
        gx.set_shape(codes.shape)
        gw.set_shape(layer.kernel_shape())
        return gx, gw, tf.reduce_sum(tf.reshape(dy, (-1, dy.shape[-1])), axis=0)
    s_x, z_x = layer.input_grid()
    w_map = tf.numpy_function(layer.weight_map, [codes], tf.float32, stateful=False)
    w_map.set_shape(layer.kernel_shape())
    if layer.gradient == "table":
        slope_b = tf.constant(layer.gradient_tables("slopes")[1])
        index = tf.bitwise.bitwise_and(tf.cast(codes, tf.int32), layer.code_mask)
        x_map = s_x * (tf.gather(slope_b, index) - z_x)
        pad = float(s_x * (layer.gradient_tables("slopes")[1][z_x & layer.code_mask] - z_x))
    else:
        x_map, pad = s_x * (tf.cast(codes, tf.float32) - z_x), 0.0
    with tf.GradientTape() as tape:
        tape.watch([x_map, w_map])
        out = _forward_float(layer, x_map, w_map, pad)
    gx, gw = tape.gradient(out, [x_map, w_map], output_gradients=dy)
    gb = tf.reduce_sum(tf.reshape(dy, (-1, dy.shape[-1])), axis=0)
    return gx, gw, gb
