"""A sweep's table, read back from the store, and its exports."""

from __future__ import annotations

import csv
import io
import json
import os

from ..errors import InvalidArgumentError

__all__ = ["SweepResult", "load_layer_map", "pareto_rows"]

LAYER_MAP_FORMAT = "approxmul-layer-map"


class SweepResult:
    """The rows of one sweep in task order, the search's best row, and exports.

    Each row is a dict: key, strategy, layers ("all" or "conv1=NAME; ..."),
    multiplier (its name when the task uses one multiplier), assignment,
    status, top1, delta_vs_exact (against the exact network of the task's
    code domain, as ``approxmul evaluate`` reports it), exact_top1,
    float_top1, drop (points below :meth:`reference`), mae_percent,
    wce_percent, cost (the chosen cost column as a MAC-weighted mean over the
    task's layers), one column per cost, error, seconds, worker.
    """

    def __init__(self, plan, refs, cost_table, columns, cost_column, store, strategy):
        self.plan, self.refs, self.strategy = plan, {r.name: r for r in refs}, strategy
        self.cost_table, self.columns, self.cost_column = cost_table, columns, cost_column
        self.store = store
        self.keys = {}  # key -> None, in task order
        self.submitted = 0
        self.best = None
        self._rows = None

    def add(self, tasks):
        for task, _ in tasks:
            self.keys.setdefault(task.key, None)
        self._rows = None

    @property
    def rows(self):
        if self._rows is None:
            stored = self.store.get(self.keys)
            raw = [stored[k] for k in self.keys if k in stored]
            ok = [r["exact_top1"] for r in raw if r["status"] == "ok"]
            reference = max(ok) if ok else None
            self._rows = [self._row(r, reference) for r in raw]
        return self._rows

    def _row(self, record, reference):
        assignment = record["assignment"]
        layers = list(self.plan.macs) if "*" in assignment else list(assignment)
        names = [assignment.get("*") or assignment[layer] for layer in layers]
        row = {
            "key": record["key"], "strategy": record["strategy"],
            "layers": "all" if "*" in assignment else "; ".join(f"{k}={v}" for k, v in
                                                                assignment.items()),
            "multiplier": names[0] if len(set(names)) == 1 else "",
            "assignment": assignment, "status": record["status"],
        }
        for field in ("top1", "delta_vs_exact", "exact_top1", "float_top1"):
            row[field] = record[field]
        row["drop"] = (reference - record["top1"]) if record["top1"] is not None else None
        row["mae_percent"], row["wce_percent"] = record["mae_percent"], record["wce_percent"]
        macs = self.plan.macs
        total = sum(macs[layer] for layer in layers)
        for column in self.columns:
            row[column] = sum(macs[l] * self.cost_table[n][column]
                              for l, n in zip(layers, names)) / total
        row["cost"] = row[self.cost_column] if self.cost_column else None
        for field in ("error", "seconds", "worker"):
            row[field] = record[field]
        return row

    def reference(self):
        """The accuracy drops are measured from: the best exact quantized network's top-1."""
        ok = [r["exact_top1"] for r in self.rows if r["status"] == "ok"]
        if not ok:
            raise InvalidArgumentError("no task of the sweep succeeded")
        return max(ok)

    def records(self, strategy):
        return [r for r in self.rows if r["strategy"] == strategy]

    def rows_for(self, tasks):
        keys = {t.key for t, _ in tasks}
        return [r for r in self.rows if r["key"] in keys]

    @property
    def failed(self):
        return [r for r in self.rows if r["status"] != "ok"]

    # ---------------------------------------------------------------- exports

    def _flat(self):
        out = []
        for row in self.rows:
            flat = dict(row)
            flat["assignment"] = json.dumps(row["assignment"], sort_keys=True)
            out.append(flat)
        return out

    def to_csv(self, path=None):
        """The table as CSV text (and written to ``path``)."""
        rows = self._flat()
        buf = io.StringIO()
        fields = list(rows[0]) if rows else ["key"]
        writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        if path is not None:
            with open(path, "w", newline="") as f:
                f.write(buf.getvalue())
        return buf.getvalue()

    def to_parquet(self, path):
        """Write the table as Parquet (needs pyarrow)."""
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError("Parquet export needs pyarrow: pip install pyarrow") from None
        rows = self._flat()
        fields = list(rows[0]) if rows else ["key"]
        pq.write_table(pa.table({f: [r[f] for r in rows] for f in fields}), path)

    def plot(self, path):
        """Save top-1 against cost, each strategy in its colour, the Pareto front and the best.

        Sensitivity rows (one layer's cost) appear only in a sensitivity-only
        sweep, one colour per layer.
        """
        if not self.cost_column:
            raise InvalidArgumentError("the plot puts accuracy against cost: give costs")
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("plotting needs matplotlib: pip install 'approxmul[plot]'") from None
        ok = [r for r in self.rows if r["status"] == "ok"]
        # whole-network rows; a sensitivity row's cost covers its one layer only,
        # so those are shown (one colour per layer) when nothing else was run
        rows = [r for r in ok if r["strategy"] != "sensitivity"]
        group = (lambda r: r["strategy"]) if rows else (lambda r: next(iter(r["assignment"])))
        rows = rows or ok
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for name in dict.fromkeys(map(group, rows)):
            part = [r for r in rows if group(r) == name]
            ax.scatter([r["cost"] for r in part], [r["top1"] for r in part], s=14, label=name)
        front = pareto_rows(rows)
        ax.step([r["cost"] for r in front], [r["top1"] for r in front], where="post",
                color="tab:red", linewidth=1, label="Pareto front")
        if self.best is not None:
            ax.scatter([self.best["cost"]], [self.best["top1"]], marker="*", s=160,
                       color="gold", edgecolor="black", zorder=5, label="best within budget")
        ax.set_xlabel(f"{self.cost_column} (MAC-weighted mean per multiply)")
        ax.set_ylabel("top-1 accuracy (%)")
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)

    def write_layer_map(self, path, row=None):
        """Write a row's assignment (default: the best) as a layer map file.

        ``approxmul evaluate --layers FILE`` and :func:`load_layer_map` read
        it. Multipliers without a spec are saved as .npy tables next to it.
        """
        row = row or self.best
        if row is None:
            raise InvalidArgumentError("no assignment to write: the search found none within "
                                       "the budget")
        assignment = row["assignment"]
        if "*" in assignment:
            assignment = {layer: assignment["*"] for layer in self.plan.macs}
        layers = {}
        for layer, name in assignment.items():
            ref = self.refs[name]
            spec = ref.spec
            if spec is None:
                import numpy as np

                side = 1 << ref.bits
                table_path = os.path.join(os.path.dirname(os.path.abspath(path)),
                                          f"{_safe(name)}.npy")
                np.save(table_path, np.frombuffer(ref.table, "<i4").reshape(side, side))
                spec = f"file:{table_path}?format=npy&signed={int(ref.signed)}"
            layers[layer] = spec
        doc = {"format": LAYER_MAP_FORMAT, "version": 1, "layers": layers,
               "names": assignment, "top1": row["top1"], "drop": row["drop"],
               "cost": row["cost"], "cost_column": self.cost_column}
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")

    def format_table(self, max_rows=40):
        head = ["strategy", "layers", "top-1%", "drop", "MAE%"] + (
            [self.cost_column] if self.cost_column else []) + ["status"]
        body = []
        for r in self.rows[:max_rows]:
            body.append([r["strategy"], r["multiplier"] if r["layers"] == "all" else r["layers"],
                         _num(r["top1"], ".2f"), _num(r["drop"], "+.2f"),
                         _num(r["mae_percent"], ".4f")]
                        + ([_num(r["cost"], ".4g")] if self.cost_column else [])
                        + [r["status"] if r["status"] == "ok" else f"failed: {r['error']}"[:80]])
        widths = [max(len(c) for c in col) for col in zip(head, *body)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
                 for cells in [head, ["-" * w for w in widths]] + body]
        if len(self.rows) > max_rows:
            lines.append(f"... {len(self.rows) - max_rows} more rows (export with --csv)")
        if self.best is not None:
            lines.append(f"best within budget: {self.best['layers']}  top-1 "
                         f"{self.best['top1']:.2f}%  drop {self.best['drop']:+.2f}  "
                         f"{self.cost_column} {self.best['cost']:.4g}")
        return "\n".join(lines)

    __str__ = format_table


def _num(value, fmt):
    return "-" if value is None else format(value, fmt)


def _safe(name):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def pareto_rows(rows):
    """Rows no other row beats on both cost (lower) and top-1 (higher), by cost.

    >>> [r["k"] for r in pareto_rows([{"k": 1, "cost": 1, "top1": 90},
    ...     {"k": 2, "cost": 2, "top1": 80}, {"k": 3, "cost": 3, "top1": 95}])]
    [1, 3]
    """
    front, best = [], float("-inf")
    for r in sorted(rows, key=lambda r: (r["cost"], -r["top1"])):
        if r["top1"] > best:
            front.append(r)
            best = r["top1"]
    return front


def load_layer_map(path):
    """{layer: multiplier spec} from a layer map file (written by a sweep, or a plain JSON dict).

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "map.json")
    >>> _ = open(p, "w").write('{"conv1": "drum:k=4"}')
    >>> load_layer_map(p)
    {'conv1': 'drum:k=4'}
    """
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise InvalidArgumentError(f"layer map {path} does not exist") from None
    except (OSError, ValueError) as error:
        raise InvalidArgumentError(f"layer map {path} is not JSON: {error}") from None
    layers = None
    if isinstance(doc, dict) and doc.get("format", LAYER_MAP_FORMAT) == LAYER_MAP_FORMAT:
        layers = doc.get("layers", doc)
    if not isinstance(layers, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in layers.items()):
        raise InvalidArgumentError(f"layer map {path}: expected an object of layer name -> "
                                   "multiplier spec strings (or one under \"layers\")")
    return dict(layers)
