"""Long C calls that Ctrl-C stops within a fraction of a second.

Python delivers KeyboardInterrupt to the main thread between bytecodes, so a
C call of several seconds (16-bit metrics, a large network's matmuls) would
ignore Ctrl-C until it returned. Here such a call still runs on the main
thread, and a watcher thread that sees the signal at once (through Python's
wakeup fd) asks the library to stop (``approxmul_cancel``, polled by the C
loops); KeyboardInterrupt is raised as the call returns. Short calls, and
calls from other threads (which never receive signals), run directly.

:class:`InterruptibleLibrary` wraps the opened cffi library so that the
long entry points take this route with no change at their call sites.
"""

import os
import signal
import threading
import time

# Work (multiply-accumulates or products) above which a kernel call may take
# milliseconds: setting the wakeup fd twice (microseconds) is then noise.
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
    # the same with the output stage: out_shape is the last argument
    "approxmul_conv2d_requantize": lambda ffi, lib, m, *a: (_product(a[-1]) * _product(a[6])
                                                            // max(1, int(a[6][0]))),
    "approxmul_conv2d_requantize_dequantize": lambda ffi, lib, m, *a: (
        _product(a[-1]) * _product(a[6]) // max(1, int(a[6][0]))),
    # the same from real input: w_shape follows x's scale, range and code type
    "approxmul_conv2d_real": lambda ffi, lib, m, *a: (
        _product(a[-1]) * _product(a[10]) // max(1, int(a[10][0]))),
    "approxmul_requantize": lambda ffi, lib, outer, channels, inner, *_: outer * channels * inner,
    "approxmul_requantize_dequantize": lambda ffi, lib, outer, channels, inner, *_:
        outer * channels * inner,
    "approxmul_quantize": lambda ffi, lib, outer, channels, inner, *_: outer * channels * inner,
    "approxmul_dequantize": lambda ffi, lib, outer, channels, inner, *_: outer * channels * inner,
    "approxmul_multiplier_metrics": lambda ffi, lib, m, *_: _pairs(ffi, lib, m),
    "approxmul_multiplier_error_map": lambda ffi, lib, m, *_: _pairs(ffi, lib, m),
}


class _CtrlC:
    """Turns Ctrl-C into ``approxmul_cancel()`` while the main thread is in a long call.

    The call runs on the main thread itself, so that it uses the OpenMP team
    that thread already has, the one PyTorch's operators use too (running it
    on a new thread per call made libgomp build a team every time, 0.4 ms of
    a 1.2 ms conv2d on 2 cores, and left torch's team spinning beside it).
    Python's C-level signal handler writes the signal's number to the wakeup
    fd at once, even while the main thread is in C: during the call that fd
    is this pipe, and a watcher thread reading it cancels the call. Python
    raises KeyboardInterrupt as soon as the call returns.
    """

    write_fd = None
    running = False  # a plain attribute: setting it runs no Python code that a signal could interrupt
    seen = bytearray()  # signal numbers read during a call, passed on to the previous fd

    @classmethod
    def pipe(cls, lib):
        if cls.write_fd is None:
            read_fd, write_fd = os.pipe()
            os.set_blocking(write_fd, False)
            threading.Thread(target=cls._watch, args=(read_fd, lib), name="approxmul Ctrl-C",
                             daemon=True).start()
            cls.write_fd = write_fd
        return cls.write_fd

    @classmethod
    def _watch(cls, read_fd, lib):
        while True:
            data = os.read(read_fd, 64)
            cls.seen += data
            if signal.SIGINT in data:
                # a cancel stops the calls already started: repeat it until the
                # call returns, in case the signal came before the call began
                while cls.running:
                    lib.approxmul_cancel()
                    time.sleep(0.05)

    @classmethod
    def forget(cls):  # a forked child has the pipe but not the watcher thread
        cls.write_fd, cls.running, cls.seen = None, False, bytearray()


os.register_at_fork(after_in_child=_CtrlC.forget)


def run_interruptibly(function, args, ffi, lib):
    """``function(*args)``, a C call returning a status, on the main thread,
    cancelled by Ctrl-C (then KeyboardInterrupt is raised as it returns)."""
    try:
        previous = signal.set_wakeup_fd(_CtrlC.pipe(lib), warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter's main thread: a plain call
        return function(*args)
    _CtrlC.running = True
    try:
        return function(*args)
    finally:
        # the fd first: a KeyboardInterrupt may be raised at the next Python call
        signal.set_wakeup_fd(previous, warn_on_full_buffer=False)
        _CtrlC.running = False
        if _CtrlC.seen:  # e.g. asyncio's loop learns its signals from its wakeup fd
            seen, _CtrlC.seen = bytes(_CtrlC.seen), bytearray()
            if previous != -1:
                try:
                    os.write(previous, seen)
                except OSError:
                    pass


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

    def with_work(self, name, work):
        """``name``'s function for calls whose work is known beforehand and
        whose arguments are already C values (a call prepared once and made
        many times): interruptible from the main thread when ``work`` is
        above :data:`LONG_WORK`, without the per-call estimate or conversion
        checks of the attribute's wrapper."""
        function = getattr(self._library, name)
        if work <= LONG_WORK:
            return function
        ffi, library, main = self._ffi, self._library, threading.main_thread()

        def call(*args):
            if threading.current_thread() is main:
                return run_interruptibly(function, args, ffi, library)
            return function(*args)

        return call

    def _wrap(self, name, function, work):
        from ._arguments import argument_error

        ffi, library = self._ffi, self._library
        params = self._parameters[name]

        def call(*args):
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
