"""The OpenMP runtime approxmul reports is the one the process really maps.

A binary wheel vendors its own runtime under a hashed name
(docs/packaging.md); `approxmul info` names the file the loader bound, which
these tests check against the kernel's view of the process.
"""

import ctypes
import os
import sys

import pytest

import approxmul_cffi as am

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the runtime's file is found with dl_iterate_phdr (Linux)")


def mapped_files():
    with open("/proc/self/maps") as maps:
        return {os.path.realpath(line.split(None, 5)[5].strip())
                for line in maps if len(line.split(None, 5)) == 6 and "/" in line}


def test_reported_runtime_is_a_mapped_openmp_library():
    facts = am.info()
    if facts["openmp"] == "no":
        assert facts["openmp_runtime"] == "none"
        return
    runtime = facts["openmp_runtime"]
    assert os.path.isabs(runtime) and os.path.isfile(runtime), runtime
    assert os.path.realpath(runtime) in mapped_files()
    # it is an OpenMP runtime, not approxmul's own library or libc
    assert os.path.realpath(runtime) != os.path.realpath(am.library_path())
    assert hasattr(ctypes.CDLL(runtime), "omp_get_max_threads")


def test_parallel_kernels_run_on_the_reported_runtime():
    # a threaded matmul after the report: the runtime named is the one in use
    am.set_num_threads(2)
    try:
        a = memoryview(bytearray(range(256)) * 16).cast("B", shape=[64, 64])
        c = am.matmul(a, a, am.Multiplier.exact(8))
        assert c.tolist()[1][2] == sum(((64 + k) % 256) * ((k * 64 + 2) % 256) for k in range(64))
    finally:
        am.set_num_threads(0)
    assert os.path.realpath(am.info()["openmp_runtime"]) in mapped_files()
