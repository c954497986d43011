"""Retraining a model through its approximate layers (``approxmul retrain``).

Example:
    >>> import torch
    >>> from approxmul_cffi.datasets import load_digits
    >>> from approxmul_cffi.evaluation import bundled_model
    >>> from approxmul_cffi.torch.graph import to_torch
    >>> from approxmul_cffi.torch.training import retrain
    >>> x, y = load_digits("train")
    >>> result = retrain(to_torch(bundled_model()), "drum:k=4", (x[:256], y[:256]),
    ...                  (x[:64], y[:64]), epochs=1, progress=False)
    >>> sorted(result)
    ['after', 'before', 'epochs', 'model']
"""

import math
import time

import numpy as np
import torch

from approxmul_cffi.torch import approximate, recalibrate
from approxmul_cffi.torch._common import evaluation_mode

__all__ = ["accuracy", "retrain"]


def _tensors(data):
    x, y = data
    return torch.as_tensor(np.asarray(x)), torch.as_tensor(np.asarray(y)).long()


def accuracy(model, data, batch_size=256):
    """Top-1 accuracy of ``model`` on ``(images, labels)``, in percent.

    >>> import torch
    >>> net = torch.nn.Linear(2, 2)
    >>> accuracy(net, (torch.eye(2), torch.tensor([0, 1]))) in (0.0, 50.0, 100.0)
    True
    """
    x, y = _tensors(data)
    correct = 0
    with evaluation_mode(model):
        for i in range(0, len(x), batch_size):
            correct += int((model(x[i:i + batch_size]).argmax(-1) == y[i:i + batch_size]).sum())
    return 100.0 * correct / len(x)


def retrain(net, multipliers, train, test, *, epochs, gradient="ste", calibration=None,
            scheme=None, lr=3e-3, batch_size=16, seed=0, progress=True, log=None,
            on_start=None, bias_correction=True):
    """Fine-tune ``net`` through approximate layers; accuracies in percent.

    net: a float torch model (changed in place: it is returned trained).
    multipliers, scheme, gradient: as :func:`approxmul_cffi.torch.approximate`.
    bias_correction: as there, but on by default: truncation-like multipliers
    with a one-sided error barely retrain without it (docs/retraining.md).
    train, test: ``(images, labels)``; calibration: images (default: train images).
    Adam with a cosine learning-rate decay to 0 over ``epochs``; batch norms
    stay folded with their running statistics. After each epoch the model is
    calibrated again on the new weights, so each accuracy is what
    ``approxmul evaluate`` (with ``--bias-correction`` when on) reports for the
    weights at that point.
    ``on_start(accuracy)`` is called before training, ``log(epoch, accuracy,
    seconds)`` after each epoch.

    Returns {"before", "epochs": [...], "after", "model"}: the model is the
    approximated one (its parameters are ``net``'s).
    """
    torch.manual_seed(seed)
    xt, yt = _tensors(train)
    cal = [xt if calibration is None else torch.as_tensor(np.asarray(calibration))]
    model = approximate(net, multipliers, calibration=cal, scheme=scheme, gradient=gradient,
                        inplace=True, bias_correction=bias_correction)
    before = accuracy(model, test)
    if on_start is not None:
        on_start(before)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    steps = epochs * math.ceil(len(xt) / batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, steps) / max(steps, 1))))
    gen = torch.Generator().manual_seed(seed)
    bar = None
    if progress:
        try:
            from tqdm import tqdm
            bar = tqdm(total=steps, unit="batch", leave=False, disable=None)
        except ImportError:
            pass
    history = []
    try:
        for epoch in range(epochs):
            start = time.perf_counter()
            model.train()
            perm = torch.randperm(len(xt), generator=gen)
            for i in range(0, len(perm), batch_size):
                idx = perm[i:i + batch_size]
                loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                if bar is not None:
                    bar.set_description(f"epoch {epoch + 1}/{epochs} loss {loss.item():.3f}",
                                        refresh=False)
                    bar.update()
            recalibrate(model, cal)
            history.append(accuracy(model, test))
            if log is not None:
                log(epoch + 1, history[-1], time.perf_counter() - start)
    finally:
        if bar is not None:
            bar.close()
    model.eval()
    return {"before": before, "epochs": history, "after": history[-1] if history else before,
            "model": model}
