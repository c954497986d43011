"""approxmul's threads beside NumPy's BLAS, PyTorch and other OpenMP pools.

Why this exists (measured; figures in docs/benchmarks.md): after every
multi-threaded BLAS call, OpenBLAS keeps its idle worker threads spinning
for tens of milliseconds, up to 2^28 CPU cycles (``OPENBLAS_THREAD_TIMEOUT=4``
set before NumPy loads shortens that to 2^4). An approxmul kernel started in
that window shares the cores with them and runs two to four times slower,
and a timing taken then says more about the BLAS call before it than about
the kernel. approxmul's own OpenMP team spins for a millisecond or two of
CPU, then sleeps (libgomp's default), and a PyTorch that links
``libgomp.so.1`` shares that very team, so torch operations and approxmul
kernels do not compete.

API:

- :func:`exclusive` -- a context manager for a stretch of approxmul work
  (an evaluation loop, a model's forward passes): approxmul runs with
  ``threads`` threads, the other pools ``limit`` names (default: BLAS) are
  limited to one thread, so nothing they run inside spins beside approxmul,
  and (``settle_first=True``) the spinning left by work before it is
  waited out.
  Everything is restored on exit. Needs threadpoolctl for the limits;
  without it only approxmul's count and the settling apply.
- :func:`settle` -- wait until the process's other threads stop burning
  CPU (idle pools parked), at most ``timeout`` seconds. Call it before
  timing a kernel.
- :func:`release` -- end approxmul's OpenMP team now (its idle threads
  exit instead of spinning beside the code that runs next); the next call
  starts it again. For approxmul calls followed by multi-threaded work on
  another runtime (NumPy's BLAS); not beside a PyTorch sharing approxmul's
  libgomp, whose team it would end too.
- :func:`pool_info` -- every thread pool in the process as threadpoolctl
  reports it, approxmul included (``user_api == "approxmul"``).
- :class:`ApproxmulController` -- approxmul's threadpoolctl controller. It
  is registered as soon as threadpoolctl is imported (before or after this
  package; never imported just for that), so ``threadpool_info()`` lists
  approxmul and ``threadpool_limits(1)`` limits it too.

Combining with PyTorch and NumPy: ``approxmul.set_num_threads(n)`` is
approxmul's own count and never changes OpenMP's (``torch.set_num_threads``
and ``OMP_NUM_THREADS`` only change approxmul's default, which follows
OpenMP). On a machine of C cores give the pools that run *at the same time*
at most C threads together; pools that alternate (torch layers and
approximate layers in one forward pass) may each use all C. Use
``threadpool_limits(n)`` to limit every pool at once, and :func:`exclusive`
around approxmul work that follows NumPy BLAS calls.

>>> import approxmul_cffi as am
>>> from approxmul_cffi import threads
>>> with threads.exclusive(1):
...     am.get_num_threads()
1
"""

import contextlib
import importlib.abc
import importlib.util
import os
import sys
import threading
import time

from ._library import LIBRARY_FILE, check, lib

__all__ = ["ApproxmulController", "exclusive", "pool_info", "release", "settle"]


# ------------------------------------------------------------------ settle

def _other_threads_cpu_ns():
    """CPU time (ns) used so far by this process's threads other than the caller; None off Linux."""
    me = threading.get_native_id()
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
    return total


def settle(timeout=0.25, window=0.005, busy=0.5):
    """Wait until the other threads of this process are idle; True once they are.

    Idle: over two successive ``window`` s they used less than ``busy`` of
    one core each time, as pools that have parked do (two, so that a
    spinning thread the scheduler left out of one window still counts). A
    spinning pool thread burns a whole core; a host's own housekeeping
    threads (a Dask worker's event loop and profiler) use far less, but on
    a loaded machine more than a few percent, and a lower default made every
    call in a Dask worker wait the whole timeout. Gives up after ``timeout``
    seconds (threads doing real work never settle) and returns False. Off
    Linux, where per-thread CPU time is not read, it sleeps ``timeout``
    (long enough for OpenBLAS's default spin) and returns True.

    >>> from approxmul_cffi import threads
    >>> threads.settle(timeout=1.0) in (True, False)
    True
    """
    start = time.perf_counter()
    before = _other_threads_cpu_ns()
    if before is None:
        time.sleep(timeout)
        return True
    quiet = 0
    while True:
        time.sleep(window)
        now = _other_threads_cpu_ns()
        quiet = quiet + 1 if now - before < busy * window * 1e9 else 0
        if quiet == 2:
            return True
        if time.perf_counter() - start >= timeout:
            return False
        before = now


def release():
    """End approxmul's OpenMP team on this thread now; the next kernel call starts it again.

    Its idle threads then exit instead of spinning (about a millisecond in
    libgomp) beside what runs next. A PyTorch sharing approxmul's libgomp
    restarts its threads at its next parallel operation too.

    >>> import numpy as np, approxmul_cffi as am
    >>> from approxmul_cffi import threads
    >>> threads.release()
    >>> am.matmul(np.ones((1, 2), np.uint8), np.ones((2, 1), np.uint8), am.Multiplier.exact(8)).tolist()
    [[2]]
    """
    check(lib.approxmul_release_threads())


# ------------------------------------------------------------ threadpoolctl

def _controller_class(threadpoolctl):
    class ApproxmulController(threadpoolctl.LibController):
        """threadpoolctl's view of libapproxmul: its thread count, through its C API."""

        user_api = "approxmul"
        internal_api = "approxmul"
        filename_prefixes = (os.path.splitext(LIBRARY_FILE)[0],)
        check_symbols = ("approxmul_get_num_threads", "approxmul_set_num_threads",
                         "approxmul_version_string")

        # threadpoolctl restores a limit with set_num_threads(the count it
        # read): where that count was approxmul's default (setting 0, which
        # follows OpenMP's count), the default comes back, not a fixed count
        _default_count = None

        def get_num_threads(self):
            count = self.dynlib.approxmul_get_num_threads()
            follows = self.dynlib.approxmul_get_num_threads_setting() == 0
            self._default_count = count if follows else None
            return count

        def set_num_threads(self, num_threads):
            num_threads = int(num_threads)
            setting = 0 if num_threads == self._default_count else num_threads
            return self.dynlib.approxmul_set_num_threads(setting)

        def get_version(self):
            import ctypes
            version = self.dynlib.approxmul_version_string
            version.restype = ctypes.c_char_p
            return version().decode()

    return ApproxmulController


ApproxmulController = None  # the class, once threadpoolctl is imported


def _register(threadpoolctl):
    global ApproxmulController
    if ApproxmulController is None:
        ApproxmulController = _controller_class(threadpoolctl)
        threadpoolctl.register(ApproxmulController)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Registers the controller right after threadpoolctl is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "threadpoolctl":
            return None
        sys.meta_path.remove(self)  # once; the lookup below uses the other finders
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            if hasattr(module, "register"):  # threadpoolctl >= 3.5
                _register(module)

        spec.loader.exec_module = exec_and_register
        return spec


def _register_with_threadpoolctl():
    module = sys.modules.get("threadpoolctl")
    if module is not None:
        if hasattr(module, "register"):
            _register(module)
    elif not any(isinstance(f, _RegisterOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterOnImport())


_register_with_threadpoolctl()


def pool_info():
    """threadpoolctl's list of the thread pools in this process, approxmul's included.

    >>> from approxmul_cffi import threads
    >>> [p["num_threads"] > 0 for p in threads.pool_info() if p["user_api"] == "approxmul"]
    [True]
    """
    import threadpoolctl
    return threadpoolctl.threadpool_info()


# ---------------------------------------------------------------- exclusive

@contextlib.contextmanager
def exclusive(threads=None, *, limit=("blas",), settle_first=True):
    """Run the enclosed approxmul work with no other pool spinning beside it.

    ``threads``: approxmul's count inside (default: its current setting).
    ``limit``: threadpoolctl user APIs limited to one thread inside
    (``"blas"``, ``"openmp"``; ``()`` for none). ``settle_first``: first
    wait for the spinning that work before the block left (:func:`settle`).
    The previous settings are restored exactly on exit. Without
    threadpoolctl the limits are skipped. Yields approxmul's thread count.

    >>> import approxmul_cffi as am
    >>> from approxmul_cffi import threads
    >>> before = am.get_num_threads()
    >>> with threads.exclusive(1) as n:
    ...     n, am.get_num_threads()
    (1, 1)
    >>> am.get_num_threads() == before
    True
    """
    previous = lib.approxmul_get_num_threads_setting()  # 0: follow OpenMP's count
    count = lib.approxmul_get_num_threads() if threads is None else int(threads)
    with contextlib.ExitStack() as stack:
        # runs last, after threadpoolctl's exit has reset every pool it saw
        stack.callback(lambda: check(lib.approxmul_set_num_threads(previous)))
        if limit:
            try:
                import threadpoolctl
            except ImportError:
                threadpoolctl = None
            if threadpoolctl is not None:
                stack.enter_context(threadpoolctl.threadpool_limits({api: 1 for api in limit}))
        # after the limits: an "openmp" limit lowers OpenMP's count, which
        # approxmul's default follows, but not an explicit approxmul count
        check(lib.approxmul_set_num_threads(count))
        if settle_first:
            settle()
        yield count
