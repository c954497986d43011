"""Long C calls that Ctrl-C stops within a fraction of a second.

Python delivers KeyboardInterrupt to the main thread between bytecodes, so a
C call of several seconds (16-bit metrics, a large network's matmuls) would
ignore Ctrl-C until it returned. Here such a call runs on a long-lived
helper thread while the main thread waits, interruptibly; on
KeyboardInterrupt it asks the library to stop (``approxmul_cancel``, polled
by the C loops), waits for the call to return, so that no buffer is released
while C still uses it, and re-raises. Short calls, and calls from other threads (which never receive
signals), run directly.

:class:`InterruptibleLibrary` wraps the opened cffi library so that the
long entry points take this route with no change at their call sites.
"""

import os
import queue
import threading

# Work (multiply-accumulates or products) above which a kernel call may take
# milliseconds: the helper thread's start-up (~0.1 ms) is then noise.
LONG_WORK = 1 << 24


def _product(values, count=4):
    out = 1
    for i in range(count):
        out *= int(values[i])
    return out


def _pairs(ffi, lib, handle):
    bits = ffi.new("int *")
    if lib.approxmul_multiplier_bits(handle, bits) != 0:
        return 0  # the call itself reports the bad handle
    return 4 ** bits[0] * 256  # exhaustive scans cost more per pair than a kernel's MAC


# name -> work(ffi, lib, *the call's arguments)
_WORK = {
    "approxmul_matmul": lambda ffi, lib, m, rows, cols, inner, *_: rows * cols * inner,
    "approxmul_bmm": lambda ffi, lib, m, batch, rows, cols, inner, *_: batch * rows * cols * inner,
    "approxmul_multiply": lambda ffi, lib, m, rows, cols, *_: rows * cols,
    # output elements times the weights per output channel (w_shape[1:])
    "approxmul_conv2d": lambda ffi, lib, m, *a: (_product(a[16]) * _product(a[6])
                                                 // max(1, int(a[6][0]))),
    "approxmul_requantize": lambda ffi, lib, outer, channels, inner, *_: outer * channels * inner,
    "approxmul_quantize": lambda ffi, lib, outer, channels, inner, *_: outer * channels * inner,
    "approxmul_dequantize": lambda ffi, lib, outer, channels, inner, *_: outer * channels * inner,
    "approxmul_multiplier_metrics": lambda ffi, lib, m, *_: _pairs(ffi, lib, m),
    "approxmul_multiplier_error_map": lambda ffi, lib, m, *_: _pairs(ffi, lib, m),
}


# The message a helper thread's failed call left, as cdata. Only the main
# thread uses helper threads, so it is the main thread's until its next call.
_main_message = [None]


class _Helper:
    """One long-lived thread that runs the main thread's long calls in turn.

    Long-lived because an OpenMP runtime keeps a team of worker threads per
    calling thread: a new thread per call made libgomp create and destroy
    approxmul's team every time (0.4 ms of a 1.2 ms conv2d on 2 cores), and
    a fresh team starts with cold caches. Replaced in a forked child, which
    inherits the queue but not the thread.
    """

    _queue = None

    @classmethod
    def submit(cls, job):
        if cls._queue is None:
            cls._queue = queue.SimpleQueue()
            threading.Thread(target=cls._serve, args=(cls._queue,), name="approxmul calls",
                             daemon=True).start()
        cls._queue.put(job)

    @staticmethod
    def _serve(jobs):
        while True:
            jobs.get()()

    @classmethod
    def forget(cls):
        cls._queue = None

    @classmethod
    def run_if_started(cls, function):
        """``function()`` on the helper thread, waited for (its exception re-raised
        here); None at once if there is no helper."""
        if cls._queue is None:
            return None
        outcome, done = {}, threading.Event()

        def job():
            try:
                outcome["value"] = function()
            except BaseException as error:  # re-raised on the waiting thread
                outcome["error"] = error
            finally:
                done.set()
        cls._queue.put(job)
        done.wait()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]


os.register_at_fork(after_in_child=_Helper.forget)


def run_interruptibly(function, args, ffi, lib):
    """``function(*args)``, a C call returning a status, on the helper thread.

    The calling (main) thread waits, receives KeyboardInterrupt at once, then
    cancels the call and waits for it to return before re-raising. The
    status is returned as from a direct call; the library keeps error
    messages per thread, so the helper thread's message is kept for
    :meth:`InterruptibleLibrary.approxmul_last_error` on this thread.
    """
    outcome = {"phase": "pending"}  # -> "running" -> done, or -> "aborted" (never called)
    phase_lock = threading.Lock()
    done = threading.Event()

    def call():
        with phase_lock:
            if outcome["phase"] == "aborted":
                return
            outcome["phase"] = "running"
        try:
            status = function(*args)
            outcome["status"] = status
            if status:
                outcome["message"] = ffi.string(lib.approxmul_last_error()).decode(
                "utf-8", "replace")
        finally:
            done.set()

    try:
        _Helper.submit(call)
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        # Ctrl-C may land anywhere above, even before the thread runs: a call
        # not yet started never starts; one started is cancelled and awaited,
        # so that no buffer it uses is released under it.
        with phase_lock:
            started = outcome["phase"] == "running"
            outcome["phase"] = "aborted" if not started else "running"
        while started:
            try:
                lib.approxmul_cancel()  # each round: it only stops calls already started
                started = not done.wait(0.05)
            except KeyboardInterrupt:  # a second Ctrl-C while the cancel takes effect
                pass
        raise
    status = outcome["status"]
    if status:
        _main_message[0] = ffi.new("char[]", outcome["message"].encode())
    return status


class InterruptibleLibrary:
    """The cffi library object as approxmul_cffi calls it.

    Every attribute is the library's own, with two additions to functions:
    the functions of ``_WORK``, called from the main thread with work above
    :data:`LONG_WORK`, run through :func:`run_interruptibly`; and a value
    that cffi cannot convert to its parameter's C type is reported by the
    parameter's name (:mod:`approxmul_cffi._arguments`).
    """

    def __init__(self, library, ffi, cdef):
        from ._arguments import parameters

        self._library = library
        self._ffi = ffi
        self._parameters = parameters(cdef)

    def __getattr__(self, name):
        value = getattr(self._library, name)
        if name in self._parameters:
            value = self._wrap(name, value, _WORK.get(name))
        setattr(self, name, value)  # looked up once
        return value

    def __dir__(self):
        return dir(self._library)

    def approxmul_last_error(self):
        """This thread's last message, including one a helper thread's call left."""
        message = _main_message[0]
        if message is not None and threading.current_thread() is threading.main_thread():
            return message
        return self._library.approxmul_last_error()

    def _wrap(self, name, function, work):
        from ._arguments import argument_error

        ffi, library = self._ffi, self._library
        params = self._parameters[name]

        def call(*args):
            if _main_message[0] is not None and threading.current_thread() is threading.main_thread():
                _main_message[0] = None  # a new call: the older message is void
            try:
                if (work is not None and threading.current_thread() is threading.main_thread()
                        and _work(work, ffi, library, args) > LONG_WORK):
                    return run_interruptibly(function, args, ffi, library)
                return function(*args)
            except (TypeError, OverflowError) as error:  # cffi's argument conversion
                raise argument_error(ffi, name, params, args, error) from None

        call.__name__ = call.__qualname__ = name
        call.__doc__ = f"{name} (approxmul.h), interruptible by Ctrl-C when long."
        return call


def _work(work, ffi, library, args):
    try:
        return work(ffi, library, *args)
    except Exception:  # odd arguments: the call reports them; run it directly
        return 0
