"""Long C calls that Ctrl-C stops within a fraction of a second.

Python delivers KeyboardInterrupt to the main thread between bytecodes, so a
C call of several seconds (16-bit metrics, a large network's matmuls) would
ignore Ctrl-C until it returned. Here such a call runs on a helper thread
while the main thread waits, interruptibly; on KeyboardInterrupt it asks the
library to stop (``approxmul_cancel``, polled by the C loops), waits for the
call to return, so that no buffer is released while C still uses it, and
re-raises. Short calls, and calls from other threads (which never receive
signals), run directly.

:class:`InterruptibleLibrary` wraps the opened cffi library so that the
long entry points take this route with no change at their call sites.
"""

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
    "approxmul_multiplier_metrics": lambda ffi, lib, m, *_: _pairs(ffi, lib, m),
    "approxmul_multiplier_error_map": lambda ffi, lib, m, *_: _pairs(ffi, lib, m),
}


def run_interruptibly(function, args, ffi, lib, error_for):
    """``function(*args)``, a C call returning a status, on a helper thread.

    The calling (main) thread waits, receives KeyboardInterrupt at once, then
    cancels the call and waits for it to return before re-raising. A
    non-zero status is raised here through ``error_for(status, message)``
    with the helper thread's message (the library keeps one per thread).
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

    worker = threading.Thread(target=call, name="approxmul call", daemon=True)
    try:
        worker.start()
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
        raise error_for(status, outcome["message"])
    return status


class InterruptibleLibrary:
    """The cffi library object, with the long entry points made interruptible.

    Every attribute is the library's own, except the functions of ``_WORK``:
    called from the main thread with work above :data:`LONG_WORK`, they run
    through :func:`run_interruptibly`.
    """

    def __init__(self, library, ffi, error_for):
        self._library = library
        self._ffi = ffi
        self._error_for = error_for

    def __getattr__(self, name):
        value = getattr(self._library, name)
        work = _WORK.get(name)
        if work is not None:
            value = self._wrap(value, work)
        setattr(self, name, value)  # looked up once
        return value

    def _wrap(self, function, work):
        ffi, library, error_for = self._ffi, self._library, self._error_for

        def call(*args):
            if (threading.current_thread() is threading.main_thread()
                    and _work(work, ffi, library, args) > LONG_WORK):
                return run_interruptibly(function, args, ffi, library, error_for)
            return function(*args)

        call.__name__ = call.__qualname__ = getattr(function, "__name__", "call")
        call.__doc__ = f"{call.__name__}, interruptible by Ctrl-C when long."
        return call


def _work(work, ffi, library, args):
    try:
        return work(ffi, library, *args)
    except Exception:  # odd arguments: the call reports them; run it directly
        return 0
