"""Many Python threads on shared multipliers: identical results, real parallelism.

cffi releases the GIL around every C call, so kernels called from several
Python threads run at once; handles are immutable and shareable.
"""

import array
import os
import threading
import time

import pytest

import approxmul_cffi as am
from portable_support import Lcg, matrix


def available_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


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


def best_time(function, repeats=5):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


@pytest.mark.skipif(available_cpus() < 2, reason="needs 2 CPUs to show two calls overlapping")
def test_gil_is_released_during_c_calls():
    """Two Python threads on one-thread kernels finish faster than one after another."""
    rand = Lcg(11)
    m = am.Multiplier.from_table(array.array("i", rand.values(65536, -1000, 1000)))
    a = matrix("B", 128, 512, rand.values(128 * 512, 0, 256))
    b = matrix("B", 512, 256, rand.values(512 * 256, 0, 256))

    def work(_=None):
        # tens of milliseconds, so that starting threads is noise next to it
        # (the table kernels do one of these matmuls in well under 1 ms)
        for _ in range(40):
            am.matmul(a, b, m)
    try:
        # what two cores give when nothing else runs on them: approxmul's own threads
        am.set_num_threads(2)
        two_cores = best_time(lambda: (work(), work()))
        am.set_num_threads(1)  # from here on, parallelism can only come from Python threads
        serial = best_time(lambda: (work(), work()))
        threaded = best_time(lambda: run_in_threads(2, work))
    finally:
        am.set_num_threads(0)
    openmp = serial / two_cores
    if openmp < 1.4:
        pytest.skip(f"two busy CPUs: OpenMP itself got only {openmp:.2f}x")
    # With the GIL held the threads would serialise (about 1.0x); released,
    # they get most of what OpenMP gets on the same cores. Half of OpenMP's
    # gain separates the two even on a noisy shared machine.
    speedup = serial / threaded
    assert speedup > 1 + (openmp - 1) / 2, \
        f"2 Python threads gave {speedup:.2f}x, OpenMP {openmp:.2f}x"


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
