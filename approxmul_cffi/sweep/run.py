"""The sweep driver: build the tasks of a strategy, run them, read the table back."""

from __future__ import annotations

import hashlib
import json
import os

from .. import nn
from ..errors import InvalidArgumentError
from . import engine, search
from .inputs import array_identity, collect_multipliers, layer_macs, model_identity
from .results import SweepResult
from .store import Store
from .worker import Context, Task

__all__ = ["STRATEGIES", "sweep", "load_model"]

STRATEGIES = ("uniform", "sensitivity", "search", "exhaustive")
MAX_EXHAUSTIVE = 1_000_000


def load_model(model):
    """An ``nn.Model`` from a model object, a bundled model name or a model file path.

    >>> load_model("digits_lenet").layers["conv1"].out_channels
    16
    """
    from ..evaluation import BUNDLED_MODEL

    if isinstance(model, nn.Model):
        return model
    if model is None:
        return nn.Model.load(BUNDLED_MODEL)
    path = os.fspath(model)
    if path.lower().endswith(".onnx"):
        raise InvalidArgumentError(f"{path}: ONNX models are not supported yet; save the model "
                                   "with approxmul_cffi.nn.Model.save and sweep that file")
    bundled = os.path.join(os.path.dirname(BUNDLED_MODEL), path + ".json")
    if not os.path.exists(path) and os.path.sep not in path and os.path.exists(bundled):
        path = bundled
    return nn.Model.load(path)


class _Plan:
    """Keys and tasks of one sweep: every key covers model, data, multipliers and version."""

    def __init__(self, model, data, calibration, config, limit, threads):
        from .._library import c_string, lib
        from ..quant import QuantConfig

        self.model = model
        x, y = data
        if limit is not None:
            if limit < 1:
                raise InvalidArgumentError(f"limit must be at least 1, got {limit}")
            x, y = x[:limit], y[:limit]
        config = QuantConfig() if config is None else config
        calibration = x if calibration is None else calibration
        self.meta = {
            "model": model_identity(model),
            "data": array_identity(x, y),
            "calibration": array_identity(calibration) + ":" + repr(config),
            "approxmul": c_string(lib.approxmul_version_string()),
        }
        self.context = Context(model, x, y, calibration, config, int(threads),
                               _digest(self.meta))
        self.layers = list(layer_macs(model))
        self.macs = layer_macs(model)

    def key(self, kind, parts):
        return f"approxmul-{kind}-{_digest([self.meta, parts])[:40]}"

    def uniform(self, ref, strategy="uniform"):
        return Task(self.key("uniform", ref.identity), strategy, True), [ref]

    def layers_task(self, assignment, strategy):
        """Task for {layer: ref}, named layers in model order; the others exact."""
        items = [(layer, assignment[layer]) for layer in self.layers if layer in assignment]
        refs = list({r.identity: r for _, r in items}.values())
        index = {r.identity: i for i, r in enumerate(refs)}
        parts = [(layer, r.identity) for layer, r in items]
        task = Task(self.key("layers", parts), strategy, False,
                    tuple((layer, index[r.identity]) for layer, r in items))
        return task, refs


def _digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def sweep(multipliers=(), *, model=None, data=None, strategy="uniform", store,
          tables=(), vendors=(), signature="u8", calibration=None, config=None, limit=None,
          costs=None, cost_column=None, budget=1.0, search_layers=None, beam_width=64,
          slack=1.5, refine=64, client=None, scheduler=None, workers=None, threads=1, timeout=10,
          progress=True, force=False, retry_failed=False, on_record=None, log=None):
    """Run a design-space sweep on Dask and return its :class:`SweepResult`.

    multipliers/tables/vendors: see :func:`collect_multipliers`. model: an
    ``nn.Model``, a bundled name or a model file (default: the bundled
    digits LeNet); data: ``(x, y)`` (default: the digits held-out split,
    calibrated on the training split). strategy: ``uniform`` (one multiplier
    in every layer), ``sensitivity`` (each layer alone with each multiplier,
    the rest exact), ``search`` (cheapest per-layer assignment within
    ``budget`` points of accuracy drop, needs ``costs``), ``exhaustive``
    (every assignment over ``search_layers``). costs: {multiplier name:
    {column: value}} (see :mod:`~approxmul_cffi.sweep.costs`); cost_column:
    the one the search minimizes (default: the first).

    store: the SQLite results file; keys already in it are not run again
    (``retry_failed`` reruns failed ones). client: a ``distributed.Client``;
    else ``scheduler`` (an address) or a LocalCluster of ``workers`` processes.
    threads: approxmul threads per task.
    """
    from .costs import match_costs

    if strategy not in STRATEGIES:
        raise InvalidArgumentError(f"unknown strategy {strategy!r}; use one of "
                                   f"{', '.join(STRATEGIES)}")
    model = load_model(model)
    if data is None:
        from ..datasets import load_digits

        data = load_digits("test")
        if calibration is None:
            calibration = load_digits("train")[0]
    refs = collect_multipliers(multipliers, tables=tables, vendors=vendors, signature=signature)
    cost_table, columns = {}, []
    if costs is not None:
        if cost_column:
            match_costs(refs, costs, [cost_column])  # a clear error when the column lacks
        cost_table, columns = match_costs(refs, costs)
        cost_column = cost_column or columns[0]
    if strategy == "search" and not cost_table:
        raise InvalidArgumentError("the search strategy needs multiplier costs (a cost CSV or "
                                   "C sources with cost headers)")
    plan = _Plan(model, data, calibration, config, limit, threads)
    layers = list(search_layers or plan.layers)
    unknown = sorted(set(layers) - set(plan.layers))
    if unknown:
        raise InvalidArgumentError(f"unknown layer(s) {', '.join(unknown)}; layers with "
                                   f"multipliers: {', '.join(plan.layers)}")
    if strategy == "exhaustive" and len(refs) ** len(layers) > MAX_EXHAUSTIVE:
        raise InvalidArgumentError(
            f"exhaustive: {len(refs)} multipliers on {len(layers)} layers make "
            f"{len(refs) ** len(layers):,} assignments (at most {MAX_EXHAUSTIVE:,}); "
            "use --search-layers or the search strategy")
    say = log or (lambda text: None)

    own = client is None
    fresh = not os.path.exists(store)
    with Store(store, plan.meta, force=force) as db:
        if own:
            try:
                client, cluster = engine.connect(scheduler, workers=workers, timeout=timeout)
            except BaseException:
                if fresh:  # an error leaves no output behind
                    db.close()
                    for suffix in ("", "-wal", "-shm"):
                        if os.path.exists(f"{store}{suffix}"):
                            os.remove(f"{store}{suffix}")
                raise
        try:
            engine.wait_for_workers(client, max(timeout, 30))
            result = SweepResult(plan, refs, cost_table, columns, cost_column, db, strategy)

            def run(tasks, desc):
                if retry_failed:
                    db.forget(db.keys("failed") & {t.key for t, _ in tasks})
                stored = db.keys()
                keys = {t.key for t, _ in tasks}
                missing = len(keys - stored)
                say(f"{desc}: {missing} of {len(keys)} tasks to run "
                    f"({len(keys) - missing} already in the store)")
                result.submitted += engine.run_tasks(client, plan.context, tasks, db,
                                                     progress=progress, desc=desc,
                                                     on_record=on_record)
                result.add(tasks)

            if strategy == "uniform":
                run([plan.uniform(r) for r in refs], "uniform")
            elif strategy == "exhaustive":
                run([plan.layers_task({l: r for l, r in zip(layers, combo)}, "exhaustive")
                     for combo in _product(refs, len(layers))], "exhaustive")
            else:
                run([plan.layers_task({layer: r}, "sensitivity") for layer in layers for r in refs],
                    "sensitivity")
                if strategy == "search":
                    batch = max(8, 2 * sum(client.nthreads().values()))
                    _search(plan, refs, layers, cost_table, cost_column, budget, beam_width,
                            slack, batch, refine, run, result, say)
            result.rows  # read the table while the store is open
        finally:
            if own:
                client.close()
                if cluster is not None:
                    cluster.close()
    return result


def _product(refs, n):
    import itertools

    return itertools.product(refs, repeat=n)


def _search(plan, refs, layers, cost_table, column, budget, width, slack, batch, refine,
            run, result, say):
    """Cheapest assignment measured within ``budget`` (docs/sweep.md, "The search").

    1. Beam search on the additive sensitivity estimate (limit: budget x
       slack), candidates verified on the cluster cheapest first, in batches;
       the first batch with a fitting assignment ends the phase.
    2. Local search: the neighbours of the best (one or two layers changed)
       that are cheaper, verified cheapest first, at most ``refine``
       evaluations per step; repeated while it finds a cheaper fitting one.
       It catches what the additive estimate misses (layers whose errors
       offset each other).
    """
    by_name = {r.name: r for r in refs}
    reference = result.reference()
    drops = {layer: {} for layer in layers}
    for row in result.records("sensitivity"):
        if row["status"] == "ok":
            (layer, name), = row["assignment"].items()
            drops[layer][name] = reference - row["top1"]
    cost = {name: cost_table[name][column] for name in by_name}
    macs = {layer: plan.macs[layer] for layer in layers}
    tried = set()

    def verify(assignments, at_most=None):
        """Evaluate untried assignments (cheapest first) until a batch holds a fitting one."""
        todo = [a for a in assignments if json.dumps(a, sort_keys=True) not in tried]
        for start in range(0, len(todo) if at_most is None else min(len(todo), at_most), batch):
            chunk = todo[start:start + batch]
            tried.update(json.dumps(a, sort_keys=True) for a in chunk)
            tasks = [plan.layers_task({l: by_name[n] for l, n in a.items()}, "search")
                     for a in chunk]
            run(tasks, "search")
            fits = [row for row in result.rows_for(tasks)
                    if row["status"] == "ok" and reference - row["top1"] <= budget + 1e-9]
            if fits:
                return min(fits, key=lambda row: (row["cost"], -row["top1"]))
        return None

    limit = budget * slack
    while result.best is None and limit >= 1e-6:
        candidates = search.beam_search(drops, macs, cost, limit, width=width)
        say(f"search: {len(candidates)} candidates with estimated drop <= {limit:.3g}")
        result.best = verify([a for _, _, a in candidates])
        limit /= 2
    if result.best is None:
        say(f"search: no assignment measured within {budget} points of the reference")
        return
    while True:
        current = result.best
        cheaper = search.neighbours(current["assignment"], list(by_name), macs, cost)
        say(f"search: best so far {current['cost']:.4g}; {len(cheaper)} cheaper neighbours")
        better = verify(cheaper, refine)
        if better is None or better["cost"] >= current["cost"]:
            return
        result.best = better
