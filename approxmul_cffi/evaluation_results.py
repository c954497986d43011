"""The table ``approxmul evaluate`` prints and exports: one :class:`EvalRow` per configuration.

>>> r = EvalResult([EvalRow("exact", "all", 0.0, 0.0, 98.0, 0.0, 1000.0, "exact")])
>>> r.row("exact").top1
98.0
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json


@dataclasses.dataclass
class EvalRow:
    """One evaluated configuration; accuracies in percent."""

    multiplier: str
    layers: str
    mae_percent: float | None
    wce_percent: float | None
    top1: float
    delta_vs_exact: float | None
    images_per_s: float
    kind: str  # "float", "exact" (quantized baseline) or "approximate"
    # what rebuilds the row's multiplier: its canonical spec, else its table's SHA-256
    spec: str | None = None


COLUMNS = [f.name for f in dataclasses.fields(EvalRow)]


class EvalResult(list):
    """A list of :class:`EvalRow` with export helpers (no pandas needed).

    ``pandas.DataFrame(result.to_dicts())`` gives a data frame.
    """

    #: facts of the whole run, repeated in every exported row (see :func:`run_identity`)
    run = {}

    def to_dicts(self):
        return [{**dataclasses.asdict(row), **self.run} for row in self]

    def to_json(self, path=None):
        text = json.dumps(self.to_dicts(), indent=1) + "\n"
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text

    def to_csv(self, path=None):
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=COLUMNS + list(self.run), lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.to_dicts())
        if path is not None:
            with open(path, "w", newline="") as f:
                f.write(buf.getvalue())
        return buf.getvalue()

    def row(self, multiplier):
        """The first row whose multiplier label is ``multiplier``."""
        for r in self:
            if r.multiplier == multiplier:
                return r
        raise KeyError(multiplier)

    def format_table(self):
        def num(v, fmt):
            return "-" if v is None else format(v, fmt)

        show_layers = any(r.layers != "all" for r in self)
        head = ["multiplier"] + (["layers"] if show_layers else []) + [
            "MAE%", "WCE%", "top-1%", "vs exact", "images/s"]
        rows = [[r.multiplier] + ([r.layers] if show_layers else []) + [
            num(r.mae_percent, ".4f"), num(r.wce_percent, ".4f"), f"{r.top1:.2f}",
            num(r.delta_vs_exact, "+.2f"), f"{r.images_per_s:,.0f}"] for r in self]
        widths = [max(len(str(c)) for c in col) for col in zip(head, *rows)]
        lines = []
        for i, cells in enumerate([head] + rows):
            lines.append("  ".join(c.ljust(w) if j < 1 + show_layers else c.rjust(w)
                                   for j, (c, w) in enumerate(zip(cells, widths))))
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
        if show_layers:
            lines.append("MAE%/WCE%: of the row's multiplier, which runs in every layer except "
                         "those the layers column fixes; the mix has no single MAE.")
        return "\n".join(lines)

    __str__ = format_table
