"""Network accuracy under approximate multipliers: the project's main job.

:func:`evaluate` quantizes a float model (or takes a quantized one), runs
the evaluation data through it once per multiplier, and returns an
:class:`EvalResult` table with the float and exact-quantized baselines.

Example:
    >>> from approxmul_cffi.evaluation import evaluate, bundled_model
    >>> from approxmul_cffi.datasets import load_digits
    >>> result = evaluate(bundled_model(), load_digits("test"),
    ...                   ["truncated:bits=8,cut=8"], limit=100, progress=False,
    ...                   calibration=load_digits("train")[0])
    >>> [row.multiplier for row in result]
    ['float', 'exact', 'truncated:bits=8,cut=8']
    >>> result[1].top1 >= 95.0
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Mapping

import numpy as np

from . import nn
from . import quant
from .bundled import (BUNDLED_ALIASES, BUNDLED_MODEL, BUNDLED_MODELS,  # noqa: F401 (API)
                      bundled_model, bundled_name, model_file)
from .evaluation_results import COLUMNS, EvalResult, EvalRow  # noqa: F401 (part of this API)
from .errors import ApproxmulError
from .multipliers import Multiplier, multiplier
from .onnx import load_model
from .provenance import identity, run_identity
from . import threads as pools

__all__ = ["DEFAULT_MULTIPLIERS", "EvalResult", "EvalRow", "bundled_model", "bundled_name",
           "evaluate", "model_file", "pareto_front", "plot_accuracy",
           "multiplier_metrics", "resolve_multiplier"]

# Built-in approximate multipliers of increasing error, for `approxmul evaluate`.
DEFAULT_MULTIPLIERS = (
    "truncated:bits=8,cut=6",
    "drum:k=6",
    "truncated:bits=8,cut=8",
    "drum:k=4",
    "truncated:bits=8,cut=10",
    "drum:k=3",
)


def default_multipliers(bits=8):
    """Built-in approximate multipliers of increasing error for ``bits``-bit codes:
    :data:`DEFAULT_MULTIPLIERS` in 8 bits, the same families scaled to other widths.

    >>> default_multipliers(4)
    ('truncated:bits=4,cut=3', 'drum:bits=4,k=3', 'truncated:bits=4,cut=4', 'drum:bits=4,k=2', 'truncated:bits=4,cut=5')
    """
    if bits == 8:
        return DEFAULT_MULTIPLIERS
    specs = []
    for cut, k in ((bits * 3 // 4, bits * 3 // 4), (bits, bits // 2), (bits * 5 // 4, bits * 3 // 8)):
        specs.append(f"truncated:bits={bits},cut={min(cut, 2 * bits - 1)}")
        if 2 <= k < bits:
            specs.append(f"drum:bits={bits},k={k}")
    return tuple(dict.fromkeys(specs))


def baseline_label(bits, signed):
    """The label of the exact quantized baseline row of one width and domain.

    >>> baseline_label(8, False), baseline_label(8, True), baseline_label(4, True)
    ('exact', 'exact:signed=1', 'exact:bits=4,signed=1')
    """
    label = "exact" if bits == 8 else f"exact:bits={bits}"
    return label + ((":" if bits == 8 else ",") + "signed=1" if signed else "")


def _code_width(qmodel, config, rows, overrides):
    """The width of the network's codes: the given model's, else
    :meth:`quant.QuantConfig.width_for` the multipliers, which must agree."""
    if qmodel is not None:
        return qmodel.config.bits
    config = quant.QuantConfig() if config is None else config
    widths = {m.bits for _, m in rows} | {m.bits for m in overrides.values()}
    if config.bits == 8 and len(widths) > 1:
        raise nn.ModelError("the multipliers have different widths (" + ", ".join(
            f"{label}: {m.bits} bits" for label, m in rows) + "); one network is quantized "
            "to one width: evaluate each width on its own")
    return config.width_for(widths)


# --------------------------------------------------------------------------
# Multipliers by spec string


def resolve_multiplier(spec):
    """Same as :func:`approxmul_cffi.multiplier` (kept for existing code).

    >>> m = resolve_multiplier("exact:bits=8,signed=1")
    >>> m.bits, bool(m.signed)
    (8, True)
    """
    return multiplier(spec)


def multiplier_metrics(m):
    """{"mae_percent", "wce_percent"} of a multiplier, from its exhaustive metrics.

    >>> multiplier_metrics(multiplier("truncated:bits=8,cut=4"))["wce_percent"]
    0.07476806640625
    """
    d = m.metrics()
    return {"mae_percent": float(d["mae_percent"]), "wce_percent": float(d["wce_percent"])}


def _label(m, index):
    spec = getattr(m, "spec", None)
    if isinstance(spec, str) and spec:
        return spec
    kind = "signed" if m.signed else "unsigned"
    return f"{getattr(m, 'name', 'multiplier')}#{index} ({m.bits}-bit {kind})"


# --------------------------------------------------------------------------
# Evaluation


def _check_data(model, data, limit):
    try:
        x, y = data
    except (TypeError, ValueError):
        raise nn.ModelError("data must be a pair (images, labels)") from None
    x = model.check_input(x)
    y = np.asarray(y)
    if y.ndim != 1 or y.dtype.kind not in "iu" or len(y) != len(x):
        raise nn.ModelError(f"labels must be a 1-d integer array of {len(x)} entries, got "
                            f"shape {y.shape} dtype {y.dtype}")
    if limit is not None:
        if limit < 1:
            raise nn.ModelError(f"limit must be at least 1, got {limit}")
        x, y = x[:limit], y[:limit]
    if len(x) == 0:
        raise nn.ModelError("no evaluation data")
    classes = model.shapes[model.output][-1]
    if y.min() < 0 or y.max() >= classes:
        outside = np.unique(y[(y < 0) | (y >= classes)])
        raise nn.ModelError(
            f"labels: {', '.join(map(str, outside[:5]))}{', ...' if len(outside) > 5 else ''} "
            f"outside the model's {classes} classes (0..{classes - 1}): the labels of another "
            f"data set, or 1-based?")
    return x, y


class _Progress:
    """tqdm over every batch of every row, shown once a run takes over 1 s."""

    def __init__(self, enabled, total):
        self.bar = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            # disable=None: no bar when stderr is not a terminal.
            self.bar = tqdm(total=total, unit="batch", delay=1.0, leave=False, file=sys.stderr,
                            disable=None)

    def update(self, label):
        if self.bar is not None:
            self.bar.set_description(label, refresh=False)
            self.bar.update()

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _normalise_multipliers(multipliers, bits=8):
    if multipliers is None:
        multipliers = default_multipliers(bits)
    if isinstance(multipliers, Mapping):
        items = list(multipliers.items())
    else:
        if isinstance(multipliers, str) or not hasattr(multipliers, "__iter__"):
            multipliers = [multipliers]
        items = [(None, m) for m in multipliers]
    out = []
    for i, (label, m) in enumerate(items):
        if label is None:
            label = m if isinstance(m, str) else _label(m, i)
        out.append((label, multiplier(m)))
    return out


def _layer_multipliers(layers):
    """{layer: Multiplier} of a per-layer assignment; a bad spec's error names its layer."""
    out = {}
    for name, m in layers.items():
        try:
            out[name] = multiplier(m)
        except ApproxmulError as error:
            raise type(error)(f"layer {name!r}: {error}") from None
    return out


def evaluate(model, data, multipliers=None, *, layers=None, limit=None, threads=None,
             progress=True, calibration=None, config=None, batch_size=256, data_source=None,
             bias_correction=False, bits=None):
    """Top-1 accuracy of ``model`` on ``data`` for each multiplier.

    model: an ``nn.Model`` (quantized here with ``config``, calibrated on
        ``calibration`` inputs, by default the evaluation inputs), an
        ``nn.QuantizedModel``, or the path of a saved model (JSON, or an ONNX
        file: docs/onnx.md). A quantized ONNX model keeps its own grids and
        arithmetic whatever ``config`` says (its exact row is ONNX Runtime's).
    data: ``(images, labels)``.
    multipliers: Multiplier objects or spec strings (a list, or a dict
        label -> multiplier); each row runs one of them in every layer.
        None: :func:`default_multipliers` of the width.
    layers: {layer name: multiplier or spec} fixed in every row (per-layer
        assignment); the other layers take the row's multiplier.
    limit: evaluate the first ``limit`` samples only.
    threads: library thread count for the run (restored afterwards).
    data_source: how the data is named in the exported results (a path, a
        split); its SHA-256 is recorded either way.
    bias_correction: before each approximate row, cancel every layer's mean
        multiplier error on the calibration inputs
        (:meth:`nn.QuantizedModel.correct_bias`); off by default.
    bits: the width of activation and weight codes (2..16). By default the
        multipliers' common width (``drum:bits=4,k=2`` quantizes to 4 bits),
        or 8; every multiplier must have it.

    Returns an :class:`EvalResult`: the float row, the exact quantized
    baseline of each code domain in use, then one row per multiplier;
    ``delta_vs_exact`` is in percentage points against the all-exact
    quantized network of the same domain.
    """
    model_source = os.path.abspath(os.fspath(model)) if isinstance(model, (str, os.PathLike)) \
        else None
    if isinstance(model, (str, os.PathLike)):
        model = load_model(model)
    qmodel = model if isinstance(model, nn.QuantizedModel) else None
    float_model = qmodel.model if qmodel else model
    x, y = _check_data(float_model, data, limit)
    overrides = _layer_multipliers(layers or {})
    # resolved once (table files are read here); the defaults depend on the width
    rows = None if multipliers is None else _normalise_multipliers(multipliers)
    if bits is None:
        bits = _code_width(qmodel, config, rows or [], overrides)
    if qmodel is None:
        config = quant.QuantConfig() if config is None else config
        if config.bits != bits:
            config = dataclasses.replace(config, bits=bits)
        # a quantized ONNX model's own arithmetic, unless another width is asked for
        # (which nn.quantize refuses for it, saying why)
        own = getattr(float_model, "quantization", None) is not None and config.bits == 8
        qmodel = nn.quantize(float_model, x if calibration is None else calibration,
                             None if own else config)
    elif qmodel.config.bits != bits:
        raise nn.ModelError(f"the quantized model has {qmodel.config.bits}-bit codes, "
                            f"not the {bits} bits asked for")
    cal_x = x if calibration is None else calibration
    # a given QuantizedModel gets its own corrections back afterwards
    saved = {node.name: node.layer._correction for node in qmodel.nodes
             if isinstance(node.layer, nn.QuantizedLayer)} if bias_correction else {}
    if rows is None:
        rows = _normalise_multipliers(None, bits)
    qmodel.assign(None, overrides)  # unknown layer names fail before any work
    layers_label = "; ".join(f"{k}={v if isinstance(v, str) else _label(overrides[k], i)}"
                             for i, (k, v) in enumerate((layers or {}).items())) or "all"

    # The exact baselines of the domains in use, then the requested rows.
    plan = []
    for signed in sorted({bool(m.signed) for _, m in rows} or {False}):
        plan.append((baseline_label(bits, signed), Multiplier.exact(bits=bits, signed=signed), {},
                     "exact"))
    baselines = {plan_m.spec for _, plan_m, _, _ in plan}
    for label, m in rows:
        try:  # every requested multiplier runs, or fails here naming it, before any work
            qmodel.assign(m, overrides)
        except nn.ModelError as error:
            raise nn.ModelError(f"multiplier {label!r}: {error}") from None
        if not overrides and m.spec in baselines:
            continue  # the baseline row already is this multiplier (exact)
        plan.append((label, m, overrides, "approximate"))
    if not rows and overrides:
        plan.append(("exact", plan[0][1], overrides, "approximate"))

    n_batches = -(-len(x) // batch_size)
    bar = _Progress(progress, n_batches * len(plan))
    quiet = contextlib.ExitStack()  # the integer rows' thread setup, undone in finally
    result = EvalResult()
    try:
        start = time.perf_counter()
        float_top1 = float((float_model.predict(x) == y).mean() * 100)
        seconds = _best_pass(time.perf_counter() - start, lambda: float_model.predict(x))
        result.append(EvalRow("float", "all", None, None, float_top1, None, len(x) / seconds,
                              "float"))
        # integer rows: `threads` for approxmul, NumPy's BLAS on one thread, and
        # the float row's BLAS threads parked first (docs/benchmarks.md)
        quiet.enter_context(pools.exclusive(threads or None))
        exact_top1 = {}
        for label, m, layer_ms, kind in plan:
            assignment = qmodel.assign(m, layer_ms)
            qmodel.prepare(assignment)  # keep weight quantization out of images/s
            if bias_correction and kind == "approximate":
                qmodel.correct_bias(cal_x, assignment, batch_size=batch_size)
            # One untimed batch: thread pools wake, workspaces fault in, and the
            # BLAS threads the float row left spinning settle; images/s then
            # measures the multiplier, not what ran before it.
            qmodel.run_codes(x[:batch_size], assignment)
            pools.settle()
            start = time.perf_counter()
            correct = 0
            for i in range(0, len(x), batch_size):
                out = qmodel.run_codes(x[i:i + batch_size], assignment)
                scores = out.codes if isinstance(out, nn.QTensor) else out
                # Codes are monotone in value within one tensor: argmax needs no dequantize.
                correct += int((scores.argmax(axis=-1) == y[i:i + batch_size]).sum())
                bar.update(label)
            speed = len(x) / _best_pass(
                time.perf_counter() - start,
                lambda: [qmodel.run_codes(x[i:i + batch_size], assignment)
                         for i in range(0, len(x), batch_size)])
            top1 = correct * 100.0 / len(x)
            signed = bool(m.signed)
            if kind == "exact":
                exact_top1[signed] = top1
            metrics = multiplier_metrics(m)
            result.append(EvalRow(label, "all" if not layer_ms else layers_label,
                                  metrics["mae_percent"], metrics["wce_percent"], top1,
                                  top1 - exact_top1[signed], speed, kind, identity(m)))
        result.run = run_identity(model_source, float_model, x, y, data_source)
        if bias_correction:  # exported rows say so; absent, the columns stay as they were
            result.run["bias_correction"] = True
    finally:
        bar.close()
        quiet.close()
        for name, correction in saved.items():
            qmodel.layer(name)._correction = correction
    return result


# A pass shorter than this is timed again (best of the passes): one pass
# over a small data set (450 digits: ~8 ms) is within the reach of a single
# scheduler hiccup on a shared machine, which made images/s swing 2x.
MIN_TIMED_SECONDS = 0.1
MAX_TIMED_PASSES = 8


def _best_pass(first, run_pass):
    """Seconds of the fastest whole-data pass: the scored one (``first`` seconds),
    then repeats of ``run_pass`` (timed only) until MIN_TIMED_SECONDS of passes."""
    best, total, passes = first, first, 1
    while total < MIN_TIMED_SECONDS and passes < MAX_TIMED_PASSES:
        start = time.perf_counter()
        run_pass()
        seconds = time.perf_counter() - start
        best, total, passes = min(best, seconds), total + seconds, passes + 1
    return best


def pareto_front(result):
    """Rows that no other row beats on both approximation and accuracy.

    A larger MAE stands for a cheaper circuit, so the front lists, for each
    accuracy level, the most approximate multiplier reaching it: no other
    row has both a MAE at least as large and a higher top-1 (ties in MAE
    keep the more accurate row). Sorted by MAE.

    >>> rows = EvalResult([EvalRow(n, "all", mae, 0.0, top1, 0.0, 1.0, "approximate")
    ...                    for n, mae, top1 in [("a", 0.1, 99), ("b", 0.2, 99),
    ...                                         ("c", 0.3, 90), ("d", 0.4, 95)]])
    >>> [r.multiplier for r in pareto_front(rows)]
    ['b', 'd']
    """
    rows = sorted((r for r in result if r.mae_percent is not None),
                  key=lambda r: (-r.mae_percent, -r.top1))
    front, best = [], -np.inf
    for r in rows:
        if r.top1 > best:
            front.append(r)
            best = r.top1
    return front[::-1]


def plot_accuracy(result, path):
    """Save top-1 accuracy against MAE% with the Pareto front (needs matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plotting needs matplotlib: pip install 'approxmul[plot]'") from None
    rows = [r for r in result if r.mae_percent is not None]
    front = pareto_front(result)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.scatter([r.mae_percent for r in rows], [r.top1 for r in rows], color="tab:blue",
               label="multipliers")
    ax.step([r.mae_percent for r in front], [r.top1 for r in front], where="pre",
            color="tab:red", marker="o", fillstyle="none", markersize=11,
            label="Pareto front (most approximate per accuracy)")
    floats = [r.top1 for r in result if r.kind == "float"]
    if floats:
        ax.axhline(floats[0], color="gray", linestyle="--", linewidth=1, label="float")
    ax.set_xlabel("MAE of the multiplier (% of 2^16)")
    ax.set_ylabel("top-1 accuracy (%)")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    from .plotting import label_points  # once the layout is final: labels avoid each other

    label_points(ax, [(r.mae_percent, r.top1) for r in rows], [r.multiplier for r in rows])
    fig.savefig(path, dpi=120)
    plt.close(fig)
