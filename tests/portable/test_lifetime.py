"""Handle lifetime and memory: close(), with, garbage collection, flat RSS."""

import array
import gc
import platform
import threading
import weakref

import pytest

import approxmul_cffi as am
from portable_support import matrix, sanitized

TABLE_4X4 = array.array("i", [x * y + 1 for x in range(4) for y in range(4)])


def rss_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def test_close_and_with_free_the_handle():
    m = am.Multiplier.exact(4)
    with m as same:
        assert same is m and m.product(3, 5) == 15
    with pytest.raises(am.InvalidArgumentError, match="closed"):
        m.product(1, 1)
    m.close()  # idempotent
    n = am.Multiplier.from_table(TABLE_4X4)
    n.close()
    with pytest.raises(am.InvalidArgumentError, match="closed"):
        am.multiply(bytearray([1]), bytearray([1]), n)


def test_garbage_collection_frees_unreferenced_multipliers():
    m = am.Multiplier.exact(3)
    ref = weakref.ref(m)
    del m
    gc.collect()  # PyPy collects late: force it
    assert ref() is None


@pytest.mark.skipif(not platform.system() == "Linux", reason="reads /proc/self/statm")
@pytest.mark.skipif(sanitized(), reason="ASan's quarantine keeps freed memory on purpose")
def test_a_million_multipliers_keep_memory_flat():
    a = matrix("B", 2, 3, [0, 1, 2, 3, 0, 1])
    b = matrix("B", 3, 2, [1, 2, 3, 0, 1, 2])
    expected = am.matmul(a, b, am.Multiplier.from_table(TABLE_4X4)).tolist()
    total, warmup = 1_000_000, 100_000
    baseline = None
    for i in range(total):
        if i == warmup:
            gc.collect()
            baseline = rss_bytes()
        kind = i % 4
        m = am.Multiplier.exact(2) if kind == 0 else am.Multiplier.from_table(TABLE_4X4)
        assert m.product(3, 3) == (9 if kind == 0 else 10)
        if i % 1000 == 1:
            assert am.matmul(a, b, m).tolist() == expected
        if kind == 1:
            with m:
                pass
        elif kind == 2:
            m.close()
        # kind 0 and 3: dropped, freed by the garbage collector
        if i % 20000 == 0:
            gc.collect()
    gc.collect()
    growth = rss_bytes() - baseline
    # a leaked handle costs over 100 bytes: 900,000 of them would be > 90 MB
    assert growth < 8 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB"


def test_buffers_and_multipliers_stay_alive_for_the_call():
    """Temporaries passed straight into a call are kept alive while C runs,
    even with the collector running in another thread."""
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            [bytearray(1000) for _ in range(100)]
            gc.collect()
            stop.wait(0.005)  # a full collection is slow on PyPy: leave the loop room
    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(100):
            result = am.matmul(matrix("B", 40, 200, [3] * 8000), matrix("B", 200, 30, [5] * 6000),
                               am.Multiplier.exact(8))
            assert result.tolist() == [[3 * 5 * 200] * 30] * 40
    finally:
        stop.set()
        thread.join()
