"""After approxmul_cancel, later calls of every kind run to the right result.

Worker threads run nested parallel loops (bmm's batches, conv2d's jobs);
they must poll for the call in progress, not for the last call that their
thread happened to serve before a cancel.
"""

import threading
import time

import numpy as np

import approxmul_cffi as am
from approxmul_cffi._library import ffi, raw_lib


def cancel_one_long_call():
    m = am.multiplier("drum:bits=16,k=8")
    status = {}

    def call():
        out = ffi.new("approxmul_metrics *")
        status["value"] = raw_lib.approxmul_multiplier_metrics(m.handle, out)

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.2)
    raw_lib.approxmul_cancel()
    worker.join()
    assert status["value"] == raw_lib.APPROXMUL_ERR_CANCELLED


def test_kernels_after_a_cancel_are_exact():
    rng = np.random.default_rng(5)
    exact = am.Multiplier.exact(bits=8, signed=True)
    # many small matrices: bmm runs one per worker thread, each a nested loop
    a = rng.integers(-128, 128, size=(16, 20, 59), dtype=np.int8)
    b = rng.integers(-128, 128, size=(16, 59, 12), dtype=np.int8)
    x = rng.integers(-128, 128, size=(3, 8, 20, 20), dtype=np.int8)
    w = rng.integers(-128, 128, size=(16, 8, 3, 3), dtype=np.int8)
    cancel_one_long_call()
    for threads in (1, 2, 4):
        am.set_num_threads(threads)
        try:
            got = am.bmm(a, b, exact)
            conv = am.conv2d(x, w, exact, padding=1)
        finally:
            am.set_num_threads(0)
        assert np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
        # direct loops as the reference for one output pixel per channel
        padded = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        for o in range(16):
            want = (padded[:, :, 5:8, 7:10] * w[o].astype(np.int64)).sum(axis=(1, 2, 3))
            assert np.array_equal(conv[:, o, 5, 7], want)
