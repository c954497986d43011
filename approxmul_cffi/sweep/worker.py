"""What runs on a Dask worker: one evaluation through the evaluator's own code.

A task calls :func:`approxmul_cffi.evaluation.evaluate` on a quantized model
that each worker process calibrates once per context and caches, so a sweep's
figures are those of ``approxmul evaluate`` run serially, bit for bit.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections import OrderedDict

__all__ = ["Context", "Task", "run_task"]


@dataclasses.dataclass
class Context:
    """Everything a task needs besides its multipliers; shipped once per worker.

    model: the float ``nn.Model``; x, y: the evaluation data (already
    limited); calibration: calibration inputs; config: a QuantConfig;
    threads: approxmul threads per task (Dask's nanny sets OMP_NUM_THREADS=1,
    so each task sets approxmul's count explicitly); identity: a digest of it all.
    """

    model: object
    x: object
    y: object
    calibration: object
    config: object
    threads: int
    identity: str


@dataclasses.dataclass(frozen=True)
class Task:
    """One evaluation: ``uniform`` (the multiplier in every layer) or per-layer.

    layers: ((layer name, index into the task's multipliers), ...); layers
    not named run the exact multiplier of the first multiplier's domain.
    """

    key: str
    strategy: str
    uniform: bool
    layers: tuple = ()


_QMODELS = OrderedDict()   # context identity -> calibrated QuantizedModel (this process)
_MULTIPLIERS = OrderedDict()  # multiplier identity -> Multiplier


def _cached(cache, key, build, size):
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    value = cache[key] = build()
    while len(cache) > size:
        cache.popitem(last=False)
    return value


def _where():
    return f"{socket.gethostname()}:{os.getpid()}"


def _multiplier(ref):
    try:
        return _cached(_MULTIPLIERS, ref.identity, ref.build, 512)
    except Exception as error:  # e.g. a C model's library missing on this machine
        raise type(error)(f"multiplier {ref.name!r} on worker {_where()}: {error}") from None


def run_task(context, refs, task):
    """Evaluate one task; returns its record (the client stores it).

    >>> import numpy as np
    >>> from approxmul_cffi import quant
    >>> from approxmul_cffi.datasets import load_digits
    >>> from approxmul_cffi.evaluation import bundled_model
    >>> from approxmul_cffi.sweep.inputs import MultiplierRef
    >>> x, y = load_digits("test")
    >>> ctx = Context(bundled_model(), x[:50], y[:50], load_digits("train")[0],
    ...               quant.QuantConfig(), 1, "doc")
    >>> record = run_task(ctx, [MultiplierRef.from_multiplier("drum:k=4")],
    ...                   Task("k", "sensitivity", False, (("fc2", 0),)))
    >>> record["status"], record["top1"] >= 90
    ('ok', True)
    """
    from .. import nn, runtime
    from ..multipliers import Multiplier
    from ..evaluation import baseline_label, evaluate, multiplier_metrics

    if runtime.get_num_threads() != context.threads:
        runtime.set_num_threads(context.threads)
    qmodel = _cached(_QMODELS, context.identity,
                     lambda: nn.quantize(context.model, context.calibration, context.config), 4)
    ms = [_multiplier(ref) for ref in refs]
    start = time.perf_counter()
    data = (context.x, context.y)
    if task.uniform:
        result = evaluate(qmodel, data, {refs[0].name: ms[0]}, progress=False)
    else:
        base = Multiplier.exact(bits=qmodel.config.bits, signed=bool(ms[task.layers[0][1]].signed))
        layers = {layer: ms[i] for layer, i in task.layers}
        result = evaluate(qmodel, data, {"assignment": base}, layers=layers, progress=False)
    row = result[-1]
    signed = bool(ms[0].signed if task.uniform else ms[task.layers[0][1]].signed)
    exact = result.row(baseline_label(qmodel.config.bits, signed))  # the domain's baseline
    metrics = (multiplier_metrics(ms[0]) if len(ms) == 1 else
               {"mae_percent": None, "wce_percent": None})
    return {
        "status": "ok", "top1": row.top1,
        "delta_vs_exact": row.delta_vs_exact if row.kind == "approximate" else 0.0,
        "exact_top1": exact.top1, "float_top1": result[0].top1,
        "mae_percent": metrics["mae_percent"], "wce_percent": metrics["wce_percent"],
        "error": None, "seconds": time.perf_counter() - start, "worker": _where(),
    }

