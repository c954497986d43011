"""Many Python threads on shared multipliers: identical results, real parallelism.

cffi releases the GIL around every C call, so kernels called from several
Python threads run at once; handles are immutable and shareable.
"""

import array
import sys
import threading
import time

import pytest

import approxmul_cffi as am
from portable_support import Lcg, matrix


def run_in_threads(count, work):
    """Runs work(index) in `count` threads started together; returns results in order."""
    barrier = threading.Barrier(count)
    results, errors = [None] * count, []

    def body(index):
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as error:  # reported on the main thread
            errors.append(error)
    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


@pytest.fixture(scope="module")
def shared():
    rand = Lcg(7)
    multipliers = [
        am.Multiplier.from_table(array.array("i", rand.values(65536, -30000, 30000))),
        am.Multiplier.exact(8),
    ]
    a = matrix("B", 48, 300, rand.values(48 * 300, 0, 256))
    b = matrix("B", 300, 40, rand.values(300 * 40, 0, 256))
    return multipliers, a, b


def test_sixteen_threads_match_serial_results(shared):
    multipliers, a, b = shared
    expected = [am.matmul(a, b, m).tobytes() for m in multipliers]
    expected_products = [am.multiply(a, a, m).tobytes() for m in multipliers]

    def work(index):
        out = []
        for round_ in range(6):
            which = (index + round_) % 2
            out.append((which, am.matmul(a, b, multipliers[which]).tobytes(),
                        am.multiply(a, a, multipliers[which]).tobytes()))
        return out
    for per_thread in run_in_threads(16, work):
        for which, product, elementwise in per_thread:
            assert product == expected[which]
            assert elementwise == expected_products[which]


def test_sixteen_threads_conv2d_match_serial():
    rand = Lcg(3)
    m = am.Multiplier.from_table(array.array("i", rand.values(65536, -3000, 3000)))
    x = memoryview(array.array("B", rand.values(2 * 3 * 17 * 19, 0, 256))).cast(
        "B", shape=[2, 3, 17, 19])
    w = memoryview(array.array("B", rand.values(4 * 3 * 3 * 3, 0, 256))).cast(
        "B", shape=[4, 3, 3, 3])
    expected = am.conv2d(x, w, m, padding=1).tolist()
    for result in run_in_threads(16, lambda _: [am.conv2d(x, w, m, padding=1) for _ in range(3)]):
        for r in result:
            assert r.tolist() == expected


def test_gil_is_released_during_c_calls():
    """A counter thread makes progress while the main thread is inside one long C call.

    The switch interval is raised so that the interpreter never hands the GIL
    over by itself: the counter can only run while the main thread has
    released it, which cffi does around the call. Holding the GIL would leave
    the counter still, however fast or loaded the machine.
    """
    rand = Lcg(11)
    m = am.Multiplier.from_table(array.array("i", rand.values(65536, -1000, 1000)))
    # ~270 M table products: several milliseconds even for the fastest kernel
    a = matrix("B", 256, 4096, rand.values(256 * 4096, 0, 256))
    b = matrix("B", 4096, 256, rand.values(4096 * 256, 0, 256))
    count, stop, started = [0], threading.Event(), threading.Event()

    def counter():
        started.set()
        while not stop.is_set():
            count[0] += 1
            time.sleep(0.0002)  # sleeping hands the GIL back to the main thread

    interval = sys.getswitchinterval()
    am.set_num_threads(1)
    thread = threading.Thread(target=counter)
    try:
        sys.setswitchinterval(100.0)
        thread.start()
        started.wait()
        moved = []
        for _ in range(50):  # until the OS has given the counter its share once
            before = count[0]
            am.matmul(a, b, m)
            moved.append(count[0] - before)
            if moved[-1] >= 20:
                break
    finally:
        sys.setswitchinterval(interval)
        stop.set()
        thread.join()
        am.set_num_threads(0)
    # the short calls around the kernel (checks, sizes) release the GIL too,
    # for a step or two of the counter each; the kernel's call gives it many
    assert moved[-1] >= 20, f"the counter moved {max(moved)} steps at most in {len(moved)} calls"


def test_concurrent_create_use_destroy():
    def work(index):
        rand = Lcg(index)
        ok = 0
        for i in range(1500):
            if i % 2:
                values = rand.values(16, -100, 100)
                m = am.Multiplier.from_table(array.array("i", values), signed=True)
                expected = values[3 * 4 + 1]  # raw patterns 3 and 1: -1 x 1
                got = m.product(-1, 1)
            else:
                m = am.Multiplier.exact(2 + index % 6)
                expected, got = 6, m.product(2, 3)
            ok += got == expected
            if i % 3:
                m.close()  # the rest go to the garbage collector
        return ok
    assert run_in_threads(8, work) == [1500] * 8
