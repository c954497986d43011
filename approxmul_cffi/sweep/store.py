"""The sweep's results on disk: one SQLite file (WAL), written by the client only.

Each finished task is committed as it arrives, so killing the client or the
cluster loses nothing finished; a rerun asks :meth:`Store.keys` what is
there and submits the rest. The ``meta`` table records what the results are
about (model, data, library version); opening the file for something else is
refused unless forced.
"""

from __future__ import annotations

import json
import sqlite3
import time

from ..errors import InvalidArgumentError

__all__ = ["Store", "StoreMismatchError"]

FORMAT = "approxmul-sweep-store"
FORMAT_VERSION = "1"

COLUMNS = ("key", "strategy", "assignment", "status", "top1", "delta_vs_exact", "exact_top1",
           "float_top1", "mae_percent", "wce_percent", "error", "seconds", "worker",
           "finished")


class StoreMismatchError(InvalidArgumentError):
    """The store holds results of another model, data set or library version."""


class Store:
    """Task results by key in a SQLite file.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "s.sqlite")
    >>> with Store(path, {"model": "m1"}) as s:
    ...     s.put("k1", "uniform", {"*": "drum:k=4"}, {"status": "ok", "top1": 97.5})
    ...     sorted(s.keys())
    ['k1']
    >>> Store(path, {"model": "m2"})
    Traceback (most recent call last):
    ...
    approxmul_cffi.sweep.store.StoreMismatchError: ... model is m1 in the store, m2 here ...
    """

    def __init__(self, path, meta, *, force=False):
        self.path = str(path)
        try:
            self.db = sqlite3.connect(self.path, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")  # WAL: durable across process kills
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            self.db.execute(f"CREATE TABLE IF NOT EXISTS results ({', '.join(COLUMNS)}, "
                            "PRIMARY KEY (key))")
        except sqlite3.DatabaseError as error:
            raise InvalidArgumentError(f"{self.path} is not a sweep store: {error}") from None
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION,
                **{k: str(v) for k, v in meta.items()}}
        stored = dict(self.db.execute("SELECT name, value FROM meta"))
        differ = [f"{k} is {stored[k]} in the store, {v} here" for k, v in meta.items()
                  if k in stored and stored[k] != v]
        if differ and not force:
            self.db.close()
            raise StoreMismatchError(
                f"store {self.path} was written for other inputs: {'; '.join(differ)} "
                "(use another --store, or --force to add to it anyway)")
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())

    def keys(self, status=None):
        """The stored keys (of one status, 'ok' or 'failed', if given)."""
        if status is None:
            return {k for (k,) in self.db.execute("SELECT key FROM results")}
        return {k for (k,) in self.db.execute("SELECT key FROM results WHERE status = ?",
                                              (status,))}

    def put(self, key, strategy, assignment, record):
        """Store one task's outcome and commit at once."""
        row = {c: record.get(c) for c in COLUMNS}
        row.update(key=key, strategy=strategy, assignment=json.dumps(assignment, sort_keys=True),
                   finished=time.time())
        with self.db:
            marks = ", ".join("?" * len(COLUMNS))
            self.db.execute(f"INSERT OR REPLACE INTO results VALUES ({marks})",
                            [row[c] for c in COLUMNS])

    def forget(self, keys):
        """Delete the rows of these keys (to run them again)."""
        keys = list(keys)
        with self.db:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                self.db.execute(f"DELETE FROM results WHERE key IN ({', '.join('?' * len(chunk))})",
                                chunk)

    def get(self, keys):
        """{key: record dict} for the given keys that are stored."""
        out = {}
        keys = list(keys)
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            cursor = self.db.execute(f"SELECT {', '.join(COLUMNS)} FROM results WHERE key IN "
                                     f"({', '.join('?' * len(chunk))})", chunk)
            for values in cursor:
                record = dict(zip(COLUMNS, values))
                record["assignment"] = json.loads(record["assignment"])
                out[record["key"]] = record
        return out

    def meta(self):
        return dict(self.db.execute("SELECT name, value FROM meta"))

    def close(self):
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
