"""What a sweep evaluates: multipliers that travel to workers, the model, the data.

Workers never receive cffi handles. Every multiplier becomes a
:class:`MultiplierRef`: built-in families travel as their spec string;
8-bit tables (table files, vendor models, in-memory tables, callables) as
their int32 table bytes, tabulated here on the client; wider vendor models
as their ``c:`` spec, reopened by path on the worker.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import glob
import hashlib
import json
import os

import numpy as np

from .. import nn
from ..errors import InvalidArgumentError
from ..multipliers import multiplier as build_multiplier

__all__ = ["MultiplierRef", "collect_multipliers", "exported_functions", "layer_macs",
           "model_identity", "array_identity"]


@dataclasses.dataclass(frozen=True)
class MultiplierRef:
    """A picklable description of one multiplier (no C handle inside).

    name: the label in result tables and cost files. spec: a spec string that
    rebuilds it (None for in-memory tables). table: int32 product table bytes
    for multipliers shipped by value. identity: what the task keys use, the
    canonical spec of a family or a digest of the table / library.

    >>> ref = MultiplierRef.from_multiplier("drum:k=4")
    >>> ref.name, ref.spec, ref.table is None
    ('drum:k=4', 'drum:bits=8,signed=0,k=4', True)
    >>> ref.build().product(200, 57)
    12480
    """

    name: str
    spec: str | None
    table: bytes | None
    bits: int
    signed: bool
    identity: str
    aliases: tuple = ()

    @classmethod
    def from_multiplier(cls, m, name=None, aliases=()):
        """A ref from a Multiplier or anything :func:`approxmul_cffi.multiplier` accepts."""
        label = name if name is not None else (m if isinstance(m, str) else None)
        m = build_multiplier(m)
        spec = m.spec
        bits, signed = m.bits, bool(m.signed)
        if label is None:
            label = spec or f"{m.name}#{id(m):x}"
        kind = "family" if spec and not spec.startswith(("file:", "c:")) else "table"
        if kind == "family":
            return cls(label, spec, None, bits, signed, spec, tuple(aliases))
        if bits <= 8 or not spec:  # a table travels (n <= 12; wider models have a spec)
            table = np.ascontiguousarray(m.table(), dtype="<i4").tobytes()
            digest = hashlib.sha256(table + bytes([signed, bits])).hexdigest()
            return cls(label, spec, table, bits, signed, f"table:{digest[:32]}", tuple(aliases))
        # wider C models: reopened by path on each worker; the key covers the library's bytes
        library = spec[2:].partition("?")[0].rsplit(":", 2)[0]
        with open(library, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        return cls(label, spec, None, bits, signed, f"{spec}#{digest[:16]}", tuple(aliases))

    def build(self):
        """The Multiplier (on a worker: from the table bytes or by reopening the spec)."""
        from ..multipliers import Multiplier

        if self.table is not None:
            side = 1 << self.bits
            table = np.frombuffer(self.table, dtype="<i4").reshape(side, side)
            return Multiplier.from_table(table, signed=self.signed)
        return build_multiplier(self.spec)

    @property
    def names(self):
        """Every name a cost file may use for this multiplier."""
        out = [self.name, *self.aliases]
        if self.spec:
            out.append(self.spec)
        return list(dict.fromkeys(out))


def exported_functions(library, pattern="*"):
    """Names of the functions a shared library exports that match a glob pattern.

    Read from the ELF dynamic symbol table (pyelftools), sorted.
    """
    try:
        from elftools.elf.elffile import ELFFile
        from elftools.common.exceptions import ELFError
    except ImportError:
        raise ImportError("listing a library's functions needs pyelftools: "
                          "pip install 'approxmul[sweep]'") from None
    try:
        with open(library, "rb") as f:
            elf = ELFFile(f)
            table = elf.get_section_by_name(".dynsym")
            names = [] if table is None else [
                s.name for s in table.iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF"
                and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")]
    except FileNotFoundError:
        raise InvalidArgumentError(f"vendor library {library} does not exist") from None
    except ELFError as error:
        raise InvalidArgumentError(f"vendor library {library} is not an ELF shared library: "
                                   f"{error}") from None
    return sorted(n for n in set(names) if fnmatch.fnmatchcase(n, pattern))


def _split_query(text):
    body, sep, query = text.partition("?")
    return body, (sep + query if sep else "")


def _table_refs(pattern):
    path_pattern, query = _split_query(pattern)
    paths = sorted(glob.glob(os.path.expanduser(path_pattern)))
    if not paths:
        raise InvalidArgumentError(f"table pattern {path_pattern!r} matches no file")
    refs = []
    for path in paths:
        stem = os.path.splitext(os.path.basename(path))[0]
        refs.append(MultiplierRef.from_multiplier(f"file:{path}{query}", name=stem,
                                                  aliases=(path, os.path.basename(path))))
    return refs


def _vendor_refs(item, signature):
    body, query = _split_query(item)
    library, _, rest = body.partition(":")  # LIBRARY:PATTERN[:SIGNATURE]
    pattern, _, given = rest.partition(":")
    signature = given or signature
    if not library or not pattern:
        raise InvalidArgumentError(f"--vendor expects LIBRARY:PATTERN[:SIGNATURE], got {item!r}")
    library = os.path.abspath(os.path.expanduser(library))
    symbols = exported_functions(library, pattern)
    if not symbols:
        raise InvalidArgumentError(f"no exported function of {library} matches {pattern!r}")
    return [MultiplierRef.from_multiplier(f"c:{library}:{s}:{signature}{query}", name=s)
            for s in symbols]


def collect_multipliers(multipliers=(), *, tables=(), vendors=(), signature="u8"):
    """MultiplierRefs from specs/objects, table file globs and vendor libraries.

    multipliers: spec strings, Multiplier objects, or a dict label -> either.
    tables: glob patterns of table files, optionally with the file spec's
    options (``"tables/*.bin?signed=1&order=offset"``); each is named by its
    file stem. vendors: ``"LIBRARY:PATTERN[:SIGNATURE]"``, every exported
    function matching PATTERN with SIGNATURE (default ``signature``), named
    by its symbol. Names must be unique.

    >>> [r.name for r in collect_multipliers(["drum:k=4", "exact"])]
    ['drum:k=4', 'exact']
    """
    items = multipliers.items() if isinstance(multipliers, dict) else [
        (None, m) for m in ([multipliers] if isinstance(multipliers, str) else multipliers)]
    refs = [MultiplierRef.from_multiplier(m, name=label) for label, m in items]
    for pattern in tables:
        refs.extend(_table_refs(pattern))
    for item in vendors:
        refs.extend(_vendor_refs(item, signature))
    seen = {}
    for ref in refs:
        if ref.name in seen:
            raise InvalidArgumentError(f"two multipliers are named {ref.name!r}; give them "
                                       "distinct labels")
        seen[ref.name] = ref
    if not refs:
        raise InvalidArgumentError("no multipliers to sweep")
    return refs


# --------------------------------------------------------------------------
# Model and data identities for task keys


def array_identity(*arrays):
    """A digest of arrays' dtypes, shapes and bytes.

    >>> array_identity(np.zeros(3)) == array_identity(np.zeros(3))
    True
    """
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:32]


def model_identity(model):
    """A digest of a float model's graph and weights (not of the file it came from).

    >>> from approxmul_cffi.evaluation import bundled_model
    >>> model_identity(bundled_model()) == model_identity(bundled_model())
    True
    """
    doc = json.dumps(model.to_json(""), sort_keys=True).encode()
    params = [v for n in model.nodes for _, v in sorted(n.layer.params().items())]
    return hashlib.sha256(doc + array_identity(*params).encode()).hexdigest()[:32]


def layer_macs(model):
    """{layer name: multiply-accumulates per sample} of every Conv2d and Linear layer.

    >>> layer_macs(nn.Model((3,), [("fc", nn.Linear(3, 2))]))
    {'fc': 6}
    """
    out = {}
    for node in model.nodes:
        layer = node.layer
        if isinstance(layer, nn.Conv2d):
            c, h, w = model.shapes[node.name]
            kh, kw = layer.kernel_size
            out[node.name] = c * h * w * (layer.in_channels // layer.groups) * kh * kw
        elif isinstance(layer, nn.Linear):
            lead = int(np.prod(model.shapes[node.name][:-1], dtype=np.int64))
            out[node.name] = lead * layer.in_features * layer.out_features
    return out
