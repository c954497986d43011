"""What identifies an evaluation's results: the multiplier, the model, the data, the library.

Exported rows carry these facts, so a figure can be traced to what produced it.
"""

import hashlib

import numpy as np

from .multipliers import Multiplier, multiplier  # noqa: F401 (the doctests use both)
from .onnx import source_files
from .runtime import get_num_threads, info


def identity(m):
    """What rebuilds a multiplier: its canonical spec, else ``table-sha256:`` of its table.

    >>> identity(multiplier("drum:k=4"))
    'drum:bits=8,signed=0,k=4'
    >>> identity(Multiplier.from_table([[0, 0], [0, 1]]))[:13]
    'table-sha256:'
    """
    if m.spec:
        return m.spec
    if m.bits <= 12:  # tables (1..12 bits) and wider models without a spec
        table = np.ascontiguousarray(np.asarray(m.table(), dtype=np.int32))
        return "table-sha256:" + hashlib.sha256(table.tobytes()).hexdigest()
    return None


def _sha256_of_files(paths):
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def run_identity(model_path, model, x, y, data_source=None):
    """Facts that identify a run, for exported results: model, data, samples, library, machine.

    model: the model file and the SHA-256 of its JSON and weights (or of the
    parameters of an in-memory model); data: its name and the SHA-256 of the
    evaluated images and labels; the library version, instruction set and
    thread count.
    """
    if model_path is not None:
        model_hash = _sha256_of_files(source_files(model_path))
    else:
        digest = hashlib.sha256()
        for node in model.nodes:
            for name, value in sorted(node.layer.params().items()):
                digest.update(f"{node.name}.{name}".encode())
                digest.update(np.ascontiguousarray(value).tobytes())
        model_hash = digest.hexdigest()
    data_hash = hashlib.sha256(np.ascontiguousarray(x).tobytes() +
                               np.ascontiguousarray(y).tobytes()).hexdigest()
    facts = info()
    return {"model": model_path or "in-memory model", "model_sha256": model_hash,
            "data": data_source or "in-memory arrays", "data_sha256": data_hash,
            "samples": int(len(y)), "library_version": facts["version"],
            "isa": facts.get("isa", ""), "threads": get_num_threads()}
