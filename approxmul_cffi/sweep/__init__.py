"""Design-space sweeps on a Dask cluster: which multiplier in which layer, at what cost.

:func:`sweep` evaluates a model with many multipliers, one evaluation per
task, on a Dask ``LocalCluster`` or an existing cluster; results stream into
a SQLite store keyed by (model, data, multipliers, assignment, library
version), so a rerun runs only what is missing. Strategies: ``uniform``,
``sensitivity``, ``search`` (cheapest per-layer assignment within an
accuracy budget) and ``exhaustive``. The command line is ``approxmul
sweep``; docs/sweep.md walks through both.

Example (two local worker processes, 100 held-out digits):

    >>> import os, tempfile
    >>> from approxmul_cffi.sweep import sweep
    >>> store = os.path.join(tempfile.mkdtemp(), "sweep.sqlite")
    >>> result = sweep(["drum:k=4", "truncated:bits=8,cut=8"], store=store, limit=100,
    ...                workers=2, progress=False)
    >>> [(r["multiplier"], r["status"]) for r in result.rows]
    [('drum:k=4', 'ok'), ('truncated:bits=8,cut=8', 'ok')]
    >>> sweep(["drum:k=4"], store=store, limit=100, workers=1, progress=False).submitted
    0
"""

from .costs import match_costs, read_cost_csv, read_source_costs
from .engine import SchedulerUnreachableError, connect
from .inputs import MultiplierRef, collect_multipliers, exported_functions, layer_macs
from .results import SweepResult, load_layer_map, pareto_rows
from .run import STRATEGIES, load_model, sweep
from .search import assignment_cost, beam_search, exhaustive, pareto_options
from .store import Store, StoreMismatchError

__all__ = [
    "MultiplierRef", "STRATEGIES", "SchedulerUnreachableError", "Store", "StoreMismatchError",
    "SweepResult", "assignment_cost", "beam_search", "collect_multipliers", "connect",
    "exhaustive", "exported_functions", "layer_macs", "load_layer_map", "load_model",
    "match_costs", "pareto_options", "pareto_rows", "read_cost_csv", "read_source_costs",
    "sweep",
]
