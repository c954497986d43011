"""The bundled digits LeNet as a float Keras model, for comparisons with the evaluator.

>>> from approxmul_cffi.keras.models import digits_lenet
>>> [layer.name for layer in digits_lenet().layers][:3]
['conv1', 'max_pooling2d', 'conv2']
"""

import keras
import numpy as np

from .. import quant
from ..evaluation import bundled_model


def digits_lenet():
    """conv1(+bn1 folded)+ReLU, pool, conv2(+bn2)+ReLU, pool, flatten, fc1+ReLU, fc2 (NHWC input).

    The batch norms are folded (as the evaluator folds them) and fc1's
    input columns reordered for Keras' (H, W, C) flatten order, so the
    approximated model computes what ``approxmul evaluate`` does.
    """
    p = {n.name: n.layer for n in bundled_model().nodes}
    weights = {}
    for conv, bn in (("conv1", "bn1"), ("conv2", "bn2")):
        c, b = p[conv], p[bn]
        w, bias = quant.fold_batchnorm(c.weight.astype(np.float64), c.bias, b.weight, b.bias,
                                       b.running_mean, b.running_var, b.eps)
        weights[conv] = [w.transpose(2, 3, 1, 0), bias]
    # the evaluator flattens (C, H, W); Keras (H, W, C): reorder fc1's input columns
    fc1 = p["fc1"].weight.reshape(64, 32, 2, 2).transpose(0, 2, 3, 1).reshape(64, 128)
    weights["fc1"] = [fc1.T, p["fc1"].bias]
    weights["fc2"] = [p["fc2"].weight.T, p["fc2"].bias]
    L = keras.layers
    net = keras.Sequential([
        keras.Input((8, 8, 1)),
        L.Conv2D(16, 3, padding="same", activation="relu", name="conv1"),
        L.MaxPooling2D(2, name="max_pooling2d"),
        L.Conv2D(32, 3, padding="same", activation="relu", name="conv2"),
        L.MaxPooling2D(2, name="max_pooling2d_1"),
        L.Flatten(), L.Dense(64, activation="relu", name="fc1"), L.Dense(10, name="fc2")])
    for name, value in weights.items():
        net.get_layer(name).set_weights([np.asarray(v, np.float32) for v in value])
    return net
