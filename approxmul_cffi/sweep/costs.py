"""Hardware cost per multiplier: from a CSV file or EvoApproxLib-style C headers.

A cost CSV has a ``multiplier`` (or ``name``) column and one numeric column
per cost (power, area, delay, or any name). C sources carry lines such as
``// PDK45_PWR = 0.391 mW``; each file's values belong to its file stem and
to every function it defines (EvoApproxLib names both alike).
"""

from __future__ import annotations

import csv
import glob
import os
import re

from ..errors import InvalidArgumentError

__all__ = ["read_cost_csv", "read_source_costs", "match_costs"]

_HEADER = re.compile(r"^\s*//\s*([A-Za-z_][\w%]*)\s*=\s*([-+0-9.eE]+)\s*(\S*)\s*$")
_FUNCTION = re.compile(r"^\s*(?:[A-Za-z_][\w ]*?\s+)\**\s*([A-Za-z_]\w*)\s*\([^;]*$")


def read_cost_csv(path):
    """{name: {column: float}} from a CSV with a multiplier/name column.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "c.csv")
    >>> _ = open(p, "w").write("multiplier,power,area\\ndrum:k=4,0.2,30\\n")
    >>> read_cost_csv(p)
    {'drum:k=4': {'power': 0.2, 'area': 30.0}}
    """
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise InvalidArgumentError(f"cost file {path} does not exist") from None
    except (OSError, csv.Error, UnicodeDecodeError) as error:
        raise InvalidArgumentError(f"cannot read cost file {path}: {error}") from None
    if not rows:
        raise InvalidArgumentError(f"cost file {path} has no rows")
    key = next((k for k in ("multiplier", "name") if k in rows[0]), None)
    if key is None:
        raise InvalidArgumentError(f"cost file {path} needs a 'multiplier' or 'name' column, "
                                   f"has {', '.join(rows[0])}")
    out = {}
    for line, row in enumerate(rows, start=2):
        values = {}
        for column, text in row.items():
            if column == key or column is None:
                continue
            try:
                values[column] = float(text)
            except (TypeError, ValueError):
                raise InvalidArgumentError(f"cost file {path}, line {line}: {column}={text!r} "
                                           "is not a number") from None
        out[row[key]] = values
    return out


def read_source_costs(patterns):
    """{name: {NAME: float}} from ``// NAME = value unit`` lines of C sources (globs).

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "mul8u_X.c"), "w").write(
    ...     "// PDK45_PWR = 0.391 mW\\n// MAE% = 0.5 %\\n"
    ...     "uint16_t mul8u_X(uint8_t A, uint8_t B)\\n{}\\n")
    >>> read_source_costs([os.path.join(d, "*.c")])["mul8u_X"]
    {'PDK45_PWR': 0.391, 'MAE%': 0.5}
    """
    out = {}
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        paths = sorted(glob.glob(os.path.expanduser(pattern)))
        if not paths:
            raise InvalidArgumentError(f"cost source pattern {pattern!r} matches no file")
        for path in paths:
            values, functions = {}, []
            with open(path, errors="replace") as f:
                for text in f:
                    match = _HEADER.match(text)
                    if match:
                        values[match.group(1)] = float(match.group(2))
                        continue
                    match = _FUNCTION.match(text)
                    if match and not text.lstrip().startswith(("#", "//", "return")):
                        functions.append(match.group(1))
            if not values:
                raise InvalidArgumentError(f"{path} has no '// NAME = value' cost lines")
            for name in [os.path.splitext(os.path.basename(path))[0], *functions]:
                out.setdefault(name, values)
    return out


def match_costs(refs, table, columns=None):
    """({multiplier name: {column: value}}, the columns) for every ref, or a clear error.

    Each ref is looked up by its name, then its other names (file path, spec).
    Every ref must be found with every column; the error lists the missing ones.

    >>> from approxmul_cffi.sweep.inputs import collect_multipliers
    >>> refs = collect_multipliers(["drum:k=4", "mitchell"])
    >>> match_costs(refs, {"drum:k=4": {"power": 0.3}, "mitchell": {"power": 0.2}})[0]
    {'drum:k=4': {'power': 0.3}, 'mitchell': {'power': 0.2}}
    >>> match_costs(refs, {"drum:k=4": {"power": 0.3}})
    Traceback (most recent call last):
    ...
    approxmul_cffi.errors.InvalidArgumentError: the cost table lacks 1 multiplier(s): mitchell
    """
    found, missing = {}, []
    for ref in refs:
        entry = next((table[n] for n in ref.names if n in table), None)
        if entry is None:
            missing.append(ref.name)
        else:
            found[ref.name] = entry
    if missing:
        raise InvalidArgumentError(
            f"the cost table lacks {len(missing)} multiplier(s): {', '.join(missing)}")
    if columns is None:
        columns = list(next(iter(found.values())))
    for column in columns:
        lacking = [name for name, entry in found.items() if column not in entry]
        if lacking:
            known = sorted({c for entry in found.values() for c in entry})
            raise InvalidArgumentError(f"no {column!r} cost for: {', '.join(lacking)}; "
                                       f"columns: {', '.join(known)}")
    return {name: {c: entry[c] for c in columns} for name, entry in found.items()}, list(columns)
