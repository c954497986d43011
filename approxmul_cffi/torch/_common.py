"""What the PyTorch adapter's modules share: its error, input checks, calibration batches."""

from __future__ import annotations

import contextlib
import math
import re

import numpy as np
import torch

from ..adapters import config_of  # noqa: F401 (the adapters' shared definition)
from ..errors import ApproximationError

_FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


@contextlib.contextmanager
def evaluation_mode(model):
    """``model`` in eval mode and without gradients for the block; every module's own
    training flag is restored afterwards (a frozen BatchNorm in a model in training
    stays in eval: ``model.train(flag)`` would set them all)."""
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        for m, flag in flags:
            m.training = flag


def batches(calibration):
    out = []
    try:
        items = iter(calibration)
    except TypeError:
        raise ApproximationError("calibration must be an iterable of input batches "
                                 "(a list of tensors or a DataLoader)") from None
    if isinstance(calibration, (torch.Tensor, np.ndarray)):
        items = iter([calibration])
    for batch in items:
        if isinstance(batch, (tuple, list)):
            batch = batch[0]  # (inputs, labels) from a DataLoader
        if isinstance(batch, dict):
            raise ApproximationError(
                f"calibration batches are dicts (keys {', '.join(map(repr, batch))}); pass the "
                "model's input tensors, e.g. [b['image'] for b in loader]")
        try:
            batch = torch.as_tensor(batch)
        except (TypeError, ValueError, RuntimeError) as e:
            raise ApproximationError(f"a calibration batch of type {type(batch).__name__} is "
                                     f"not a tensor: {e}") from None
        check_input(batch, "calibration batch")
        out.append(batch)
    if not out:
        raise ApproximationError("calibration data is empty")
    return out


def check_input(x, what, values=True):
    """Refuses what the integer layers cannot take: another device or dtype and, if
    ``values``, NaN or infinity (a layer's forward leaves those to its quantization,
    which refuses them in the pass it makes anyway)."""
    if x.device.type != "cpu":
        raise ApproximationError(
            f"{what} is on device {x.device}; approxmul's integer kernels run on the CPU: "
            "move the model and its inputs there (model.cpu(), x.cpu())")
    if x.dtype not in _FLOATS:
        raise ApproximationError(f"{what} has dtype {x.dtype}; a floating-point tensor is needed")
    # one reduction pass: NaN propagates through min/max, infinity shows in them
    if values and x.numel() and not all(
            map(math.isfinite, (float(v) for v in torch.aminmax(x.detach())))):
        raise nonfinite_error(what)


# the C library's refusal of a value that has no code (quantize's messages)
_NONFINITE = re.compile(r"x\[\d+\] is (NaN|infinite)")


def refuses_nonfinite(error):
    """Whether an InvalidArgumentError is quantization refusing NaN or infinity."""
    return _NONFINITE.match(str(error)) is not None


def nonfinite_error(what, detail=""):
    return ApproximationError(f"{what} contains NaN or infinity{detail}; nothing is saturated "
                              "silently, clean the data first")
