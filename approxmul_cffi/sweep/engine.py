"""Running sweep tasks on Dask distributed and streaming their results to the store.

Tasks are submitted with their deterministic keys in a bounded window (the
client holds at most a few hundred futures whatever the sweep's size) and
consumed as they complete; each record is committed to the store before the
next is read. A task that raises is retried once by Dask, then stored as
failed with its error; a task whose worker dies is rescheduled by Dask.
"""

from __future__ import annotations

import os
import sys
import time

from ..errors import InvalidArgumentError

__all__ = ["SchedulerUnreachableError", "connect", "default_workers", "run_tasks"]


class SchedulerUnreachableError(InvalidArgumentError, OSError):
    """No Dask scheduler answered at the given address within the timeout."""


def _distributed():
    try:
        import distributed
    except ImportError:
        raise ImportError("sweeps run on Dask: pip install 'approxmul[sweep]'") from None
    return distributed


def default_workers():
    """One worker process per core this process may use.

    >>> default_workers() >= 1
    True
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def connect(scheduler=None, *, workers=None, timeout=10):
    """(client, cluster or None): a LocalCluster of worker processes, or an existing scheduler.

    Local workers run one thread each (approxmul sets its own thread count
    per task). ``scheduler``: an address such as ``tcp://host:8786``; an
    unreachable one raises :class:`SchedulerUnreachableError` after
    ``timeout`` seconds.
    """
    distributed = _distributed()
    if scheduler:
        try:
            return distributed.Client(scheduler, timeout=timeout, set_as_default=False), None
        except (OSError, TimeoutError) as error:
            raise SchedulerUnreachableError(
                f"cannot reach the Dask scheduler at {scheduler} within {timeout:g} s: "
                f"{error}") from None
    cluster = distributed.LocalCluster(
        n_workers=workers or default_workers(), threads_per_worker=1, processes=True,
        dashboard_address=":0", silence_logs=40)
    return distributed.Client(cluster, set_as_default=False), cluster


class _Bar:
    """tqdm's bar (done/total, rate, ETA) on stderr; nothing when disabled or absent."""

    def __init__(self, enabled, total, initial, desc):
        self.bar = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total, initial=initial, unit="task", desc=desc,
                            file=sys.stderr, dynamic_ncols=True, smoothing=0.1)

    def update(self, failed):
        if self.bar is not None:
            if failed:
                self.bar.set_postfix(failed=failed, refresh=False)
            self.bar.update()

    def close(self):
        if self.bar is not None:
            self.bar.close()


def run_tasks(client, context, tasks, store, *, progress=True, window=None, desc="sweep",
              on_record=None):
    """Run ``tasks`` [(Task, [MultiplierRef]), ...] not yet in ``store``; returns their count.

    Results go to ``store`` one by one as they complete; ``on_record(key,
    record)`` is called after each is committed.
    """
    from .worker import run_task

    distributed = _distributed()
    stored = store.keys()
    unique = {t.key: (t, refs) for t, refs in tasks}
    todo = [item for key, item in unique.items() if key not in stored]
    total = len(unique)
    if not todo:
        return 0
    # The context and each multiplier are tasks of their own: Dask ships each
    # to a worker once, and recomputes them if the worker holding them dies
    # (scattered data would be lost with it).
    ctx_future = client.submit(_same, context, key=f"approxmul-context-{context.identity}",
                               pure=False)
    ref_futures = {}

    def ref_future(ref):
        if ref.identity not in ref_futures:
            ref_futures[ref.identity] = client.submit(
                _same, ref, key=f"approxmul-multiplier-{_slug(ref.identity)}", pure=False)
        return ref_futures[ref.identity]

    if window is None:
        window = max(64, 8 * sum(client.nthreads().values()) or 64)
    bar = _Bar(progress, total, total - len(todo), desc)
    pending = iter(todo)
    by_future = {}
    failed = 0
    queue = None

    def submit_next():
        for task, refs in pending:
            future = client.submit(run_task, ctx_future, [ref_future(r) for r in refs], task,
                                   key=task.key, retries=1, pure=False)
            by_future[future.key] = (future, task, refs)
            if queue is not None:
                queue.add(future)
            return True
        return False

    try:
        for _ in range(window):
            if not submit_next():
                break
        # created on the first window: as_completed needs futures to find the client
        # with_results: the event loop gathers results while this thread stores them
        queue = distributed.as_completed([f for f, _, _ in by_future.values()], loop=client.loop,
                                         with_results=True, raise_errors=False)
        for future, value in queue:
            _, task, refs = by_future.pop(future.key)
            if future.status == "finished":
                record = value
            else:
                error = future.exception()
                record = {"status": "failed", "error": f"{type(error).__name__}: {error}"}
                failed += 1
            store.put(task.key, task.strategy, assignment_names(task, refs), record)
            future.release()
            bar.update(failed)
            if on_record is not None:
                on_record(task.key, record)
            submit_next()
    finally:
        bar.close()
        for future, _, _ in by_future.values():
            future.cancel()
        ctx_future.release()
        for f in ref_futures.values():
            f.release()
    return len(todo)


def assignment_names(task, refs):
    """The task's assignment as stored: {"*": name} (uniform) or {layer: name}.

    >>> from approxmul_cffi.sweep.inputs import MultiplierRef
    >>> from approxmul_cffi.sweep.worker import Task
    >>> refs = [MultiplierRef.from_multiplier("drum:k=4")]
    >>> assignment_names(Task("k", "sensitivity", False, (("fc1", 0),)), refs)
    {'fc1': 'drum:k=4'}
    """
    if task.uniform:
        return {"*": refs[0].name}
    return {layer: refs[i].name for layer, i in task.layers}


def _same(value):
    return value


def _slug(text):
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:24]


def wait_for_workers(client, timeout):
    """Wait until the cluster has a worker (clear error after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while not client.nthreads():
        if time.monotonic() > deadline:
            raise SchedulerUnreachableError(f"the scheduler has no workers after {timeout:g} s")
        time.sleep(0.2)
