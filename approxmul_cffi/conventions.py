"""Which signedness and row order a product table file was written in, judged by its values.

A table file does not say whether its operands are signed or in which row
order it lists them; read in the wrong convention, a good multiplier looks
like noise (a signed table read as unsigned: MAE about 49 % of 4^n) and
networks run at chance with no error. Approximate multipliers stay close to
the exact product, so the convention in which the table is nearest to it
is almost certainly the one it was written in. :func:`assess` measures the
table in every convention; :func:`mismatch` says when the declared one is
far off and another fits much better. The loaders warn
(:class:`TableConventionWarning`), and the command line refuses, naming the
flags that fit.
"""

import array

from ._library import check, ffi, lib
from .errors import ApproxmulError

# (signed, order): for signed operands "twos" is the same layout as "raw"
CANDIDATES = ((False, "raw"), (True, "raw"), (True, "offset"))

#: declared conventions at least this far from exact (MAE % of 4^n) are suspect...
SUSPECT_PERCENT = 5.0
#: ...when another convention is at least this many times closer
BETTER_FACTOR = 4.0


class TableConventionWarning(UserWarning):
    """A table file fits another signedness or row order much better than the declared one."""


def same(a, b):
    """Whether two (signed, order) conventions are the same layout."""
    def norm(c):
        return (bool(c[0]), "raw" if c[1] in ("raw", "twos") else c[1])
    return norm(a) == norm(b)


def assess(read):
    """[(signed, order, mae_percent)] for every convention in which the table can be read.

    ``read(signed, order)`` returns ``(table, bits)`` as
    :func:`approxmul_cffi.formats.read_table` does, or raises an ApproxmulError
    when the values do not fit that convention (the convention is then
    skipped). MAE % is the mean |table - exact product| over every operand
    pair, in percent of 4^bits (docs/metrics.md).

    >>> import os, tempfile, approxmul_cffi as am
    >>> from approxmul_cffi.formats import read_table
    >>> path = os.path.join(tempfile.mkdtemp(), "signed.bin")
    >>> am.multiplier("exact:signed=1").save(path)
    >>> [(s, o, round(p, 1)) for s, o, p in assess(
    ...     lambda signed, order: read_table(path, signed=signed, order=order))]
    [(False, 'raw', 49.6), (True, 'raw', 0.0), (True, 'offset', 8.3)]
    """
    results = []
    for signed, order in CANDIDATES:
        try:
            table, bits = read(signed, order)
            results.append((signed, order, _mae_percent(table, bits, signed)))
        except ApproxmulError:
            continue
    return results


def _mae_percent(table, bits, signed):
    """MAE % (of 4^bits) of a raw-pattern table against the exact product, by the C metrics."""
    flat = array.array("i", (int(v) for row in table for v in row))
    out = ffi.new("approxmul_multiplier **")
    with ffi.from_buffer("int32_t[]", flat) as pointer:
        check(lib.approxmul_multiplier_from_table(pointer, len(flat), bits, signed, out))
    handle = ffi.gc(out[0], lib.approxmul_multiplier_destroy)
    metrics = ffi.new("approxmul_metrics *")
    check(lib.approxmul_multiplier_metrics(handle, metrics))
    return metrics.mae_percent


def mismatch(assessed, signed, order):
    """(declared MAE %, best (signed, order, MAE %)) when the declared convention looks wrong, else None.

    >>> mismatch([(False, "raw", 49.6), (True, "raw", 0.0)], False, "raw")
    (49.6, (True, 'raw', 0.0))
    >>> mismatch([(False, "raw", 0.7), (True, "twos", 49.0)], False, "raw") is None
    True
    """
    declared = [p for s, o, p in assessed if same((s, o), (signed, order))]
    if not declared:
        return None
    others = [entry for entry in assessed if not same(entry[:2], (signed, order))]
    if not others:
        return None
    best = min(others, key=lambda entry: entry[2])
    if declared[0] >= SUSPECT_PERCENT and best[2] * BETTER_FACTOR <= declared[0]:
        return declared[0], best
    return None


def describe(signed, order):
    """A convention in the words of the Python API.

    >>> describe(True, "offset")
    "signed=True, order='offset'"
    """
    order = "raw" if order == "twos" else order  # the same layout for signed operands
    return f"signed={bool(signed)}, order={order!r}" if signed else "signed=False"


def warning_text(path, declared_percent, signed, order, best):
    """The one-line warning for :func:`mismatch`'s result."""
    return (f"{path}: read as {describe(signed, order)}, the table is {declared_percent:.3g} % "
            f"(MAE, of 4^n) away from the exact product; as {describe(*best[:2])} it is "
            f"{best[2]:.3g} %: probably that convention (pass it to load_multiplier, or "
            f"?signed=..&order=.. in a file: spec)")


def check_file(path, signed, order="raw", format=None):
    """(assessments, warning text or None) for a table file read in the declared convention.

    >>> import os, tempfile, approxmul_cffi as am
    >>> path = os.path.join(tempfile.mkdtemp(), "signed.bin")
    >>> am.multiplier("exact:signed=1").save(path)
    >>> check_file(path, signed=True)[1] is None
    True
    >>> "as signed=True, order='raw' it is 0 %" in check_file(path, signed=False)[1]
    True
    """
    from .formats import read_table

    results = assess(lambda s, o: read_table(path, signed=s, order=o, format=format))
    found = mismatch(results, signed, order)
    if found is None:
        return results, None
    return results, warning_text(path, found[0], signed, order, found[1])


def best(assessed):
    """The (signed, order, MAE %) nearest to the exact product, or None."""
    return min(assessed, key=lambda entry: entry[2]) if assessed else None


def warn_if_mismatched(path, signed, order="raw", format=None):
    """Warn (:class:`TableConventionWarning`) when a table file fits another convention much better.

    >>> import os, tempfile, warnings, approxmul_cffi as am
    >>> path = os.path.join(tempfile.mkdtemp(), "signed.bin")
    >>> am.multiplier("exact:signed=1").save(path)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = am.load_multiplier(path)              # read as unsigned: 49.6 % from exact
    >>> caught[0].category.__name__, "signed=True, order='raw' it is 0 %" in str(caught[0].message)
    ('TableConventionWarning', True)
    """
    import warnings

    _, text = check_file(path, signed, order, format)
    if text is not None:
        warnings.warn(text, TableConventionWarning, stacklevel=3)
