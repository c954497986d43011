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

    Bundled names are those of ``approxmul evaluate`` (``digits-lenet``,
    ``mnist-lenet5``; the file stems ``digits_lenet``, ``mnist_lenet5`` too).

    >>> load_model("digits-lenet").layers["conv1"].out_channels
    16
    >>> load_model("mnist_lenet5").input_shape
    (1, 28, 28)
    """
    from ..evaluation import BUNDLED_MODEL, model_file

    if isinstance(model, nn.Model):
        return model
    if model is None:
        return nn.Model.load(BUNDLED_MODEL)
    path = os.fspath(model)
    if path.lower().endswith(".onnx"):
        raise InvalidArgumentError(f"{path}: ONNX models are not supported yet; save the model "
                                   "with approxmul_cffi.nn.Model.save and sweep that file")
    return nn.Model.load(model_file(path))


def default_dataset(model):
    """The data set a sweep of ``model`` runs on without data: a bundled model's own
    (``mnist`` for ``mnist-lenet5``), else ``digits``.

    >>> default_dataset("mnist-lenet5"), default_dataset("digits_lenet"), default_dataset(None)
    ('mnist', 'digits', 'digits')
    """
    from ..evaluation import BUNDLED_MODELS, bundled_name

    name = bundled_name(model) if isinstance(model, str) else None
    return BUNDLED_MODELS[name][1] if name else "digits"


class _Plan:
    """Keys and tasks of one sweep: every key covers model, data, multipliers and version."""

    def __init__(self, model, data, calibration, config, limit, threads, data_source=None):
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
        _check_data(model, x, y, calibration, data_source)
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


def _check_data(model, x, y, calibration, source):
    """Data that does not fit the model is refused here, before any task fails on it."""
    import numpy as np

    from ..evaluation import _check_data as check

    try:
        check(model, (x, y), None)
        model.check_input(np.asarray(calibration))
    except nn.ModelError as error:
        hint = "; give the model's data (--data FILE.npz)" if source else ""
        raise InvalidArgumentError(f"{source or 'the data'} does not fit the model: "
                                   f"{error}{hint}") from None


def _digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def sweep(multipliers=(), *, model=None, data=None, strategy="uniform", store,
          tables=(), vendors=(), signature="u8", calibration=None, config=None, limit=None,
          costs=None, cost_column=None, budget=1.0, search_layers=None, beam_width=64,
          slack=1.5, refine=64, client=None, scheduler=None, workers=None, threads=1, timeout=10,
          progress=True, force=False, retry_failed=False, on_record=None, log=None):
    """Run a design-space sweep on Dask and return its :class:`SweepResult`.

    multipliers/tables/vendors: see :func:`collect_multipliers`. model: an
    ``nn.Model``, a bundled name (``digits-lenet``, ``mnist-lenet5``) or a
    model file (default: the bundled digits LeNet); data: ``(x, y)``
    (default: the bundled model's held-out split, calibrated on its training
    split; the digits ones for other models). strategy: ``uniform`` (one multiplier
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
    dataset = default_dataset(model)
    model = load_model(model)
    source = None
    if data is None:
        from .. import datasets

        data = datasets.load(dataset, "test")
        if calibration is None:
            calibration = datasets.load(dataset, "train")[0]
        # only a model that is not bundled can misfit its default data
        source = f"the {dataset} held-out split (the default data of a model that is not bundled)"
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
    plan = _Plan(model, data, calibration, config, limit, threads, source)
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
       the first batch with a fitting assignment ends the phase. While none
       fits, the limit drops below the largest estimate listed (at least
       halving) and the beam reruns, until the list stops changing.
    2. The measured assignments the sensitivity table holds (one layer
       changed, the others exact, when the exact multiplier is among the
       candidates; all-exact among them) that fit the budget: the cheapest
       becomes the best when it is cheaper (measured again as a whole-network
       assignment, so that its row carries the cost of every layer).
    3. Local search: the neighbours of the best (one or two layers changed)
       that are cheaper, verified cheapest first, at most ``refine``
       evaluations per step; repeated while it finds a cheaper fitting one.
       It catches what the additive estimate misses (layers whose errors
       offset each other).

    The best is the cheapest assignment measured within the budget; None
    only when no measured assignment fits (no exact multiplier given).
    """
    by_name = {r.name: r for r in refs}
    reference = result.reference()
    drops = {layer: {} for layer in layers}
    alone = []  # measured sensitivity rows: (layer, name, top1)
    for row in result.records("sensitivity"):
        if row["status"] == "ok":
            (layer, name), = row["assignment"].items()
            drops[layer][name] = reference - row["top1"]
            alone.append((layer, name, row["top1"]))
    cost = {name: cost_table[name][column] for name in by_name}
    macs = {layer: plan.macs[layer] for layer in layers}
    tried = set()
    fitting = []  # every measured assignment within the budget

    def fits(row):
        return row["status"] == "ok" and reference - row["top1"] <= budget + 1e-9

    def verify(assignments, at_most=None):
        """Evaluate untried assignments (cheapest first) until a batch holds a fitting one."""
        todo = [a for a in assignments if json.dumps(a, sort_keys=True) not in tried]
        for start in range(0, len(todo) if at_most is None else min(len(todo), at_most), batch):
            chunk = todo[start:start + batch]
            tried.update(json.dumps(a, sort_keys=True) for a in chunk)
            tasks = [plan.layers_task({l: by_name[n] for l, n in a.items()}, "search")
                     for a in chunk]
            run(tasks, "search")
            found = [row for row in result.rows_for(tasks) if fits(row)]
            fitting.extend(found)
            if found:
                return min(found, key=lambda row: (row["cost"], -row["top1"]))
        return None

    # 1. the beam on the additive estimate
    limit, previous = budget * slack, None
    while result.best is None:
        candidates = search.beam_search(drops, macs, cost, limit, width=width)
        listed = [a for _, _, a in candidates]
        if listed == previous:  # a lower limit lists nothing new
            break
        say(f"search: {len(listed)} candidates with estimated drop <= {limit:.3g}")
        if not listed:  # nor will a lower limit
            break
        result.best = verify(listed)
        largest = max(d for _, d, _ in candidates)
        if largest <= 0:  # every candidate is estimated at 0: any lower limit lists them again
            break
        # below the largest estimate listed, so that the list changes; at least halved
        limit, previous = min(limit / 2, largest * (1 - 1e-9)), listed

    # 2. what the sensitivity table measured: one layer changed, the others exact
    exact = _exact_names(refs, plan.context.config.bits)
    known = []
    for layer, name, top1 in alone:
        if reference - top1 > budget + 1e-9:
            continue
        if len(layers) == 1:
            whole = {layer: name}
        elif by_name[name].signed in exact:
            whole = dict.fromkeys(layers, exact[by_name[name].signed])
            whole[layer] = name
        else:
            continue  # the other layers' exact multiplier has no cost: not an assignment
        known.append((search.assignment_cost(whole, macs, cost), -top1, whole))
    for whole_cost, _, whole in sorted(known, key=lambda k: (k[0], k[1])):
        if result.best is not None and whole_cost >= result.best["cost"] - 1e-12:
            break
        found = verify([whole])
        if found is not None:
            say("search: the best so far is an assignment of the sensitivity table")
            result.best = found
            break
    if result.best is None:
        hint = "" if exact else " (give the exact multiplier and its cost: all-exact fits)"
        say(f"search: no assignment measured within {budget} points of the reference{hint}")
        return

    # 3. local search around the best
    while True:
        current = result.best
        cheaper = search.neighbours(current["assignment"], list(by_name), macs, cost)
        say(f"search: best so far {current['cost']:.4g}; {len(cheaper)} cheaper neighbours")
        better = verify(cheaper, refine)
        if better is None or better["cost"] >= current["cost"]:
            break
        result.best = better
    # the cheapest of every assignment measured within the budget
    result.best = min(fitting, key=lambda row: (row["cost"], -row["top1"]))


def _exact_names(refs, bits):
    """{signed: name} of the candidates that are the exact multiplier of ``bits``-bit codes."""
    from ..multipliers import Multiplier
    from .inputs import MultiplierRef

    out = {}
    for signed in (False, True):
        identity = MultiplierRef.from_multiplier(Multiplier.exact(bits=bits, signed=signed)).identity
        for ref in refs:
            if ref.identity == identity:
                out.setdefault(signed, ref.name)
    return out
